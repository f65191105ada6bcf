//! B13 fleet: N hollow Outpost nodes and the kubelet-shaped client model side by side,
//! each on its own test API server, in the same run and at the same time (the harness of
//! `cargo xtask fleet`, `outpost_tests::fleet::scenario`): an idle window, then a
//! whole-fleet outage during which every API pod's container exits once. Full: 50 nodes,
//! 10 pods each, 1 idle minute, a 20 s outage; `--quick`: 10 nodes, 15 idle seconds, a
//! 10 s outage (the two sides at once keep it under a minute).
//!
//! The figures are Outpost's, the baseline the model's (ratio = Outpost / model):
//! requests per node-minute idle, the requests beyond idle after the restore, the peak
//! second after it over the idle QPS, the seconds until everything is synced, and the
//! slowest node's first write after the restore. While the model is not built in this
//! tree, Outpost's figures are reported without a baseline.

use std::time::Duration;

use anyhow::Context;
use outpost_tests::fleet::scenario::{self, Client, Error, Figures, Scenario};

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
            scenario.outages = vec![Duration::from_secs(20)];
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
    let kubelet = match kubelet {
        Ok(figures) => Some(figures),
        Err(Error::KubeletNotBuilt) => None,
        Err(error) => return Err(anyhow::Error::new(error).context("the kubelet model")),
    };
    Ok(entries(&outpost, kubelet.as_ref()))
}

/// One figure of a scenario, Outpost's or the model's.
type Figure = fn(&Figures) -> f64;

fn entries(outpost: &Figures, kubelet: Option<&Figures>) -> Vec<Entry> {
    let (n, pods) = (outpost.nodes, outpost.nodes * outpost.pods_per_node);
    let Some(outage) = outpost.outages.first() else { return Vec::new() };
    let fleet = format!("{n} nodes, {pods} API pods");
    let beyond = |f: &Figures| f.outages.first().map_or(f64::NAN, |o| o.beyond_idle());
    let peak = |f: &Figures| {
        f.outages
            .first()
            .map_or(f64::NAN, |o| o.peak().1 as f64 / o.idle_qps.max(f64::MIN_POSITIVE))
    };
    let synced = |f: &Figures| {
        let outage = f.outages.first();
        outage.and_then(|o| o.synced_after()).map_or(f64::NAN, |at| at.as_secs_f64())
    };
    let first_write = |f: &Figures| {
        let outage = f.outages.first();
        outage
            .and_then(|o| o.slowest_first_write.as_ref())
            .map_or(f64::NAN, |(_, at)| at.as_secs_f64())
    };
    let idle: Figure = Figures::requests_per_node_minute;
    let cap = outage.backoff_cap.as_secs_f64();
    let side =
        |name: String, unit: &'static str, figure: Figure, target: String, met: fn(f64) -> bool| {
            let value = figure(outpost);
            let mut entry = Entry::new("B13", name, unit, Stats::of(vec![value]));
            if let Some(kubelet) = kubelet {
                entry = entry.beside(Stats::of(vec![figure(kubelet)]));
            }
            entry.target(&target, value.is_finite() && met(value))
        };
    let budget = outage.budget();
    let mut entries = vec![
        side(
            format!("fleet idle: requests per node-minute ({fleet})"),
            "req/node-min",
            idle,
            "≤ 6.5".into(),
            |v| v <= 6.5,
        ),
        side(
            format!(
                "fleet {} s outage: requests beyond idle after the restore ({fleet})",
                outage.length.as_secs()
            ),
            "requests",
            beyond,
            format!("≤ 2 per pod + 5 per node = {budget:.0}"),
            |_| true,
        ),
        side(
            format!("fleet outage: peak second / idle QPS ({fleet})"),
            "×",
            peak,
            "≤ 10".into(),
            |v| v <= 10.0,
        ),
        side(
            format!("fleet outage: all synced after the restore ({fleet})"),
            "s",
            synced,
            "< 60 s".into(),
            |v| v < 60.0,
        ),
        side(
            format!("fleet outage: slowest node's first write after the restore ({fleet})"),
            "s",
            first_write,
            format!("≤ its backoff's cap ({cap:.0} s)"),
            |_| true,
        ),
    ];
    // The two targets that depend on the scenario's own numbers.
    entries[1].met = outage.beyond_idle() <= budget;
    entries[4].met = first_write(outpost) <= cap;
    let by_verb: serde_json::Map<String, serde_json::Value> = outage
        .requests
        .iter()
        .map(|((verb, resource), count)| (format!("{verb} {resource}"), (*count).into()))
        .collect();
    let model = if kubelet.is_some() {
        "kubelet model beside"
    } else {
        "kubelet model not built: no baseline"
    };
    entries[1] =
        entries[1].clone().detail("requests after the restore", by_verb).detail("baseline", model);
    entries
}
