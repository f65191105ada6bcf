//! B13 fleet: N hollow Outpost nodes and the kubelet-shaped client model side by side,
//! each on its own test API server, in the same run and at the same time (the harness of
//! `cargo xtask fleet`, `outpost_tests::fleet::scenario`): an idle window, then
//! whole-fleet outages during which every API pod's container exits once. Full: 50
//! nodes, the four scenarios of BENCHMARKS.md at once (10 API pods per node and none,
//! each with a 60 s and then a 600 s outage; 200 nodes in the process); `--quick`: 10
//! nodes, 10 pods each, 15 idle seconds, a 10 s outage (under a minute).
//!
//! The figures are Outpost's, the baseline the model's (ratio = Outpost / model), per
//! scenario: requests per node-minute idle; after the restore, the requests in all, those
//! beyond idle (per pod and per node too), the peak second over the idle QPS, the seconds
//! until everything is synced, and the slowest node's first write. The 1,000-node
//! figures come from `cargo xtask fleet` in a release build (the book's fleet page).

use std::time::Duration;

use anyhow::Context;
use outpost_tests::fleet::scenario::{self, Client, Figures, Outage, Scenario};

use crate::Options;
use crate::report::{Entry, Stats};

pub fn run(options: &Options) -> anyhow::Result<Vec<Entry>> {
    let scenario = |client, pods_per_node| {
        let mut scenario = Scenario::new(client, if options.quick { 10 } else { 50 });
        scenario.pods_per_node = pods_per_node;
        if options.quick {
            scenario.settle = Duration::from_secs(5);
            scenario.idle = Duration::from_secs(15);
            scenario.outages = vec![Duration::from_secs(10)];
            scenario.tail = Duration::from_secs(5);
        } else {
            scenario.idle = Duration::from_secs(60);
            // Past 30 s: the reconnect is spread (`outpost_core::pace::spread_window`).
            scenario.outages = vec![Duration::from_secs(60), Duration::from_secs(600)];
        }
        scenario
    };
    let pods: &[usize] = if options.quick { &[10] } else { &[10, 0] };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start a tokio runtime")?;
    let say = |line: String| eprintln!("B13: {line}");
    let pairs = runtime.block_on(futures::future::join_all(pods.iter().map(|&pods| {
        let (outpost, kubelet) = (scenario(Client::Outpost, pods), scenario(Client::Kubelet, pods));
        let say = &say;
        async move {
            let (outpost, kubelet) =
                tokio::join!(scenario::run(&outpost, say), scenario::run(&kubelet, say));
            let outpost = outpost.context("Outpost's hollow nodes")?;
            let kubelet = kubelet.context("the kubelet model")?;
            anyhow::Ok(entries(&outpost, &kubelet))
        }
    })));
    let mut all = Vec::new();
    for entries in pairs {
        all.extend(entries?);
    }
    Ok(all)
}

/// One figure of an outage, Outpost's or the model's (NaN when it has none: not synced).
type Figure = fn(&Figures, &Outage) -> Option<f64>;

fn entries(outpost: &Figures, kubelet: &Figures) -> Vec<Entry> {
    let fleet =
        format!("{} nodes, {} API pods", outpost.nodes, outpost.nodes * outpost.pods_per_node);
    let idle = Entry::new(
        "B13",
        format!("fleet idle: requests per node-minute ({fleet})"),
        "req/node-min",
        Stats::of(vec![outpost.requests_per_node_minute()]),
    )
    .beside(Stats::of(vec![kubelet.requests_per_node_minute()]))
    .target("≤ 6.5", outpost.requests_per_node_minute() <= 6.5);
    let mut all = vec![idle];
    for (ours, theirs) in outpost.outages.iter().zip(&kubelet.outages) {
        all.extend(outage_entries(outpost, ours, kubelet, theirs, &fleet));
    }
    all
}

fn outage_entries(
    outpost: &Figures,
    ours: &Outage,
    kubelet: &Figures,
    theirs: &Outage,
    fleet: &str,
) -> Vec<Entry> {
    let fleet = format!("{fleet}, a {} s outage", ours.length.as_secs());
    let side = |name: &str,
                unit: &'static str,
                figure: Figure,
                target: String,
                met: &dyn Fn(f64) -> bool| {
        let value = figure(outpost, ours).unwrap_or(f64::NAN);
        let baseline = figure(kubelet, theirs).unwrap_or(f64::NAN);
        Entry::new("B13", format!("fleet {name} ({fleet})"), unit, Stats::of(vec![value]))
            .beside(Stats::of(vec![baseline]))
            .target(&target, value.is_finite() && met(value))
    };
    let budget = ours.budget();
    let cap = ours.backoff_cap.as_secs_f64();
    let by_verb: serde_json::Map<String, serde_json::Value> = ours
        .requests
        .iter()
        .map(|((verb, resource), count)| (format!("{verb} {resource}"), (*count).into()))
        .collect();
    let mut entries = vec![
        side(
            "reconnect: requests after the restore",
            "requests",
            |_, o| Some(o.total() as f64),
            "reported (no target)".into(),
            &|_| true,
        )
        .detail("requests after the restore", by_verb),
        side(
            "reconnect: requests beyond idle",
            "requests",
            |_, o| Some(o.beyond_idle()),
            format!("≤ 2 per pod + 5 per node = {budget:.0}"),
            &|v| v <= budget,
        ),
        side(
            "reconnect: requests beyond idle, Events left out (the model posts none)",
            "requests",
            |_, o| Some(o.beyond_idle_except("events")),
            format!("≤ 2 per pod + 5 per node = {budget:.0}"),
            &|v| v <= budget,
        ),
        side(
            "reconnect: requests beyond idle per node",
            "req/node",
            |f, o| Some(o.beyond_idle() / f.nodes.max(1) as f64),
            "reported (no target; the budget is on requests beyond idle)".into(),
            &|_| true,
        ),
        side(
            "reconnect: peak second / idle QPS",
            "×",
            |_, o| Some(o.peak().1 as f64 / o.idle_qps.max(f64::MIN_POSITIVE)),
            "≤ 10".into(),
            &|v| v <= 10.0,
        ),
        side(
            "reconnect: all synced after the restore",
            "s",
            |_, o| Some(o.synced_after()?.as_secs_f64()),
            "< 60 s".into(),
            &|v| v < 60.0,
        ),
        side(
            "reconnect: slowest node's first write after the restore",
            "s",
            |_, o| Some(o.slowest_first_write.as_ref()?.1.as_secs_f64()),
            format!("≤ its backoff's cap ({cap:.0} s)"),
            &|v| v <= cap,
        ),
    ];
    if ours.pods > 0 {
        entries.insert(
            3,
            side(
                "reconnect: requests beyond idle per pod",
                "req/pod",
                |_, o| Some(o.beyond_idle() / o.pods as f64),
                "reported (no target; the budget is on requests beyond idle)".into(),
                &|_| true,
            ),
        );
    }
    entries
}
