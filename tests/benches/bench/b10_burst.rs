//! B10 burst: 100 manifests dropped into the agent's manifest dir at once → all 100
//! containers running (pod networking, real containerd), against podman starting the
//! same 100 pods as a user would script it (`podman pod create` + `podman run -d --pod`
//! per pod, [`PODMAN_PARALLELISM`] pods under way at a time, as `xargs -P`) in the same
//! run. `--quick`: 10 pods, one round.
//!
//! "Running" is each container's first command writing its name to a FIFO the benchmark
//! reads ([`Signals`]), as in B2; the figure is the time from the first manifest written
//! (the first podman command) to the last pod's line. The rounds alternate between the
//! two sides, and each side's pods are removed (and, for the agent, torn down) before
//! the next round, under new names.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use outpost_tests::agent::Agent;
use outpost_tests::podman::Podman;
use outpost_tests::pods::Node;

use crate::Options;
use crate::bench::b2_start;
use crate::bench::b5_footprint::{PATIENCE, bench_pods, bench_uids, teardown};
use crate::report::{Entry, Stats};
use crate::signal::{Signals, announce};

/// How many pods a user's script has podman start at a time (`xargs -P 4`). Each
/// `podman` command is a short CPU-bound Go program serialized on podman's state
/// database and locks, on 2 cores: 20 pods took 11.6 s one at a time, 7.5 s two at a
/// time, 6.3 s four and 6.2 s eight at a time here. Four is where it levels off: the
/// fastest a user would find, without a fan-out no one would script.
pub const PODMAN_PARALLELISM: usize = 4;
/// The names of this benchmark's pods start with it.
const PREFIX: &str = "burst-";
const TARGET_RATIO: f64 = 0.3;

pub fn run(options: &Options) -> anyhow::Result<Vec<Entry>> {
    let (pods, rounds) = if options.quick { (10, 1) } else { (100, 3) };
    let node = Node::try_new().map_err(|what| anyhow::anyhow!("B10 needs {what}"))?;
    let signals = Signals::new(&node.path("signal"))?;
    let podman = Podman::new(&node.path("podman"));
    let agent = node.start();

    // One unmeasured pod on each side first: cold caches are not the burst's.
    let warm = format!("{PREFIX}warm");
    node.put(&format!("{warm}.yaml"), &b2_start::manifest(&warm, false, &signals.dir));
    signals.wait_for(&warm, PATIENCE).context("the warm-up pod")?;
    let mut uids = bench_uids(&agent, PREFIX)?;
    remove_all(&node, &agent, &uids)?;
    let volume = format!("{}:/signal", signals.dir.display());
    let podman = podman.and_then(|podman| {
        podman.pod("podman-warm", &[volume.as_str()], &announce("podman-warm"))?;
        signals.wait_for("podman-warm", PATIENCE).context("podman's warm-up pod")?;
        podman.remove_all()?;
        Ok(podman)
    });

    let mut outpost = Vec::new();
    let mut baseline = Vec::new();
    let mut podman_failed = None;
    for round in 0..rounds {
        let names: Vec<String> = (0..pods).map(|i| format!("{PREFIX}r{round}-{i:03}")).collect();
        let start = Instant::now();
        for name in &names {
            node.put(&format!("{name}.yaml"), &b2_start::manifest(name, false, &signals.dir));
        }
        outpost.push(all_running(&signals, &names, start).context("the agent's burst")?);
        uids.extend(bench_uids(&agent, PREFIX)?);
        remove_all(&node, &agent, &uids)?;

        let Ok(podman) = &podman else { continue };
        let names: Vec<String> = names.iter().map(|n| format!("podman-{n}")).collect();
        let start = Instant::now();
        let started = podman.pods(&names, PODMAN_PARALLELISM, &[volume.as_str()], announce);
        match started.and_then(|()| all_running(&signals, &names, start)) {
            Ok(took) => baseline.push(took),
            Err(error) => podman_failed = Some(error.context("podman's burst")),
        }
        podman.remove_all()?;
    }
    let torn_down = teardown(&node, agent, &uids, PREFIX);

    let entry = Entry::new(
        "B10",
        format!("burst: {pods} manifests at once → all running, pod network"),
        "ms",
        Stats::millis(&outpost),
    )
    .detail("rounds", rounds)
    .detail("podman_parallelism", PODMAN_PARALLELISM);
    let target = "p50 ≤ 0.3 × podman (same pods, xargs -P 4)";
    let entry = match (podman, podman_failed) {
        (Err(error), _) | (Ok(_), Some(error)) => {
            entry.target(target, false).error(format!("podman: {error:#}"))
        }
        (Ok(_), None) => entry.against(Stats::millis(&baseline), TARGET_RATIO, target),
    };
    Ok(match torn_down {
        Ok(()) => vec![entry],
        Err(error) => vec![entry.error(format!("teardown: {error:#}"))],
    })
}

/// Waits until each of `names` has announced itself; the time from `start` to the last.
fn all_running(signals: &Signals, names: &[String], start: Instant) -> anyhow::Result<Duration> {
    let mut waiting: HashSet<&str> = names.iter().map(String::as_str).collect();
    let deadline = start + PATIENCE;
    let mut last = start;
    while !waiting.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok((line, at)) = signals.next(left) else {
            bail!("{} of {} pods not running after {PATIENCE:?}", waiting.len(), names.len());
        };
        if waiting.remove(line.as_str()) {
            last = at;
        }
    }
    Ok(last - start)
}

/// Removes every manifest and waits until the agent has removed the pods, their
/// containers and their sandboxes (`uids`: every pod's so far).
fn remove_all(node: &Node, agent: &Agent, uids: &[String]) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(node.manifests())?.flatten() {
        std::fs::remove_file(entry.path())?;
    }
    let deadline = Instant::now() + PATIENCE;
    let gone = || node.containers().is_empty() && uids.iter().all(|u| node.leftovers(u).is_empty());
    while !(bench_pods(agent, PREFIX)?.is_empty() && gone()) {
        if Instant::now() > deadline {
            bail!("the agent's pods were not removed within {PATIENCE:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}
