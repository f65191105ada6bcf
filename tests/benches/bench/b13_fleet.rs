//! B13 fleet: N hollow Outpost nodes and the kubelet-shaped client model side by side,
//! each on its own test API server, in the same run and at the same time (the harness of
//! `cargo xtask fleet`, `outpost_tests::fleet::scenario`): an idle window, then a
//! whole-fleet outage during which every API pod's container exits once. Full: 50 nodes,
//! 10 pods each, 1 idle minute, a 60 s outage (long enough for Outpost to spread its
//! reconnect); `--quick`: 10 nodes, 15 idle seconds, a 10 s outage (the two sides at
//! once keep it under a minute).
//!
//! The figures are Outpost's, the baseline the model's (ratio = Outpost / model):
//! requests per node-minute idle, the requests beyond idle after the restore, the peak
//! second after it over the idle QPS, the seconds until everything is synced, and the
//! slowest node's first write after the restore.

use std::time::Duration;

use anyhow::Context;
use outpost_tests::fleet::scenario::{self, Client, Figures, Outage, Scenario};

use crate::Options;
use crate::report::{Entry, Stats};

pub fn run(options: &Options) -> anyhow::Result<Vec<Entry>> {
    let scenario = |client| {
        let mut scenario = Scenario::new(client, if options.quick { 10 } else { 50 });
        scenario.pods_per_node = 10;
        if options.quick {
            scenario.settle = Duration::from_secs(5);
            scenario.idle = Duration::from_secs(15);
            scenario.outages = vec![Duration::from_secs(10)];
            scenario.tail = Duration::from_secs(5);
        } else {
            scenario.idle = Duration::from_secs(60);
            // Past 30 s: the reconnect is spread (`outpost_core::pace::spread_window`).
            scenario.outages = vec![Duration::from_secs(60)];
        }
        scenario
    };
    let (outpost, kubelet) = (scenario(Client::Outpost), scenario(Client::Kubelet));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start a tokio runtime")?;
    let say = |line: String| eprintln!("B13: {line}");
    let (outpost, kubelet) = runtime.block_on(async {
        tokio::join!(scenario::run(&outpost, &say), scenario::run(&kubelet, &say))
    });
    let outpost = outpost.context("Outpost's hollow nodes")?;
    let kubelet = kubelet.context("the kubelet model")?;
    Ok(entries(&outpost, &kubelet))
}

/// One figure of a scenario's first outage, Outpost's or the model's (NaN when it has
/// none: not synced, no outage).
type Figure = fn(&Figures, &Outage) -> Option<f64>;

fn entries(outpost: &Figures, kubelet: &Figures) -> Vec<Entry> {
    let (Some(ours), Some(theirs)) = (outpost.outages.first(), kubelet.outages.first()) else {
        return Vec::new();
    };
    let fleet = format!(
        "{} nodes, {} API pods, a {} s outage",
        ours.nodes,
        ours.pods,
        ours.length.as_secs()
    );
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
    vec![
        side(
            "idle: requests per node-minute",
            "req/node-min",
            |f, _| Some(f.requests_per_node_minute()),
            "≤ 6.5".into(),
            &|v| v <= 6.5,
        ),
        side(
            "reconnect: requests beyond idle",
            "requests",
            |_, o| Some(o.beyond_idle()),
            format!("≤ 2 per pod + 5 per node = {budget:.0}"),
            &|v| v <= budget,
        )
        .detail("requests after the restore", by_verb),
        side(
            "reconnect: requests beyond idle, Events left out (the model posts none)",
            "requests",
            |_, o| Some(o.beyond_idle_except("events")),
            format!("≤ 2 per pod + 5 per node = {budget:.0}"),
            &|v| v <= budget,
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
    ]
}
