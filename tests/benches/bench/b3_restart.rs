//! B3 restart: a container's process is killed (SIGKILL, restartPolicy Always, its first
//! restart) → the agent sees the exit (the agent's log line stamps it) → the replacement's
//! process runs (its FIFO announcement). Two passes, side by side: the agent with its BPF
//! programs (the kernel's exit tracepoint and containerd's event stream, whichever comes
//! first), and with `--ebpf=false` (containerd's event stream alone).
//!
//! One pod per sample, so every sample is a first restart (later ones wait for the
//! crash-loop backoff by design).

use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use outpost_tests::agent::Agent;
use outpost_tests::pods::Node;

use crate::Options;
use crate::b2_start::manifest;
use crate::report::{Entry, Stats};
use crate::signal::Signals;

const TIMEOUT: Duration = Duration::from_secs(60);
const REPLACEMENT_TARGET: &str = "p50 ≤ B2's p50 (pod network)";

/// B3's replacement target: its p50 at most B2's (pod network) from the same run; missed
/// when B2 did not run.
pub fn compare_with_b2(entries: &mut [Entry]) {
    let b2 = entries
        .iter()
        .find(|e| e.id == "B2" && e.name.contains("pod network"))
        .map(|e| e.stats.p50);
    for entry in entries.iter_mut().filter(|e| e.id == "B3" && e.target == REPLACEMENT_TARGET) {
        match b2 {
            Some(p50) => {
                entry.met = entry.stats.p50 <= p50;
                entry.target = format!("{REPLACEMENT_TARGET}: {p50} ms");
            }
            None => entry.target = format!("{REPLACEMENT_TARGET}: B2 did not run"),
        }
    }
}

pub fn run(options: &Options) -> anyhow::Result<Vec<Entry>> {
    let samples = if options.quick { 6 } else { 20 };
    let node = Node::try_new().map_err(|what| anyhow::anyhow!("B3 needs {what}"))?;
    let signals = Signals::new(&node.path("signal"))?;
    let kernel = pass(&node, &signals, Exits::Ebpf, samples)?;
    let containerd = pass(&node, &signals, Exits::ContainerdOnly, samples)?;
    Ok(vec![
        Entry::new(
            "B3",
            "restart: process killed → agent sees the exit (eBPF + containerd)",
            "ms",
            Stats::millis(&kernel.seen),
        )
        .p99_below(10.0, "p99 < 10 ms"),
        Entry::new(
            "B3",
            "restart: process killed → agent sees the exit (containerd events only, --ebpf=false)",
            "ms",
            Stats::millis(&containerd.seen),
        )
        .p99_below(10.0, "p99 < 10 ms"),
        Entry::new(
            "B3",
            "restart: process killed → replacement running (first restart)",
            "ms",
            Stats::millis(&kernel.replaced),
        )
        // Judged against B2 by `compare_with_b2` once both have run.
        .target(REPLACEMENT_TARGET, false),
    ])
}

/// Where the agent of one pass learns of exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exits {
    /// The kernel's exit tracepoint and containerd's event stream, whichever comes first.
    Ebpf,
    /// containerd's event stream alone.
    ContainerdOnly,
}

struct Pass {
    seen: Vec<Duration>,
    replaced: Vec<Duration>,
}

/// One agent, `samples` pods, each killed once.
fn pass(node: &Node, signals: &Signals, exits: Exits, samples: usize) -> anyhow::Result<Pass> {
    let mut args = node.args();
    if exits == Exits::ContainerdOnly {
        args.push("--ebpf=false".into());
    }
    let agent = Agent::start_pods(&node.manifests(), &args);
    if exits == Exits::Ebpf && !ebpf_loaded(&agent) {
        bail!("the agent did not load its BPF programs: B3 cannot measure the eBPF path");
    }
    let mut pass =
        Pass { seen: Vec::with_capacity(samples), replaced: Vec::with_capacity(samples) };
    let prefix = if exits == Exits::Ebpf { "b3k" } else { "b3c" };
    for i in 0..samples {
        let name = format!("{prefix}-{i}");
        node.put(&format!("{name}.yaml"), &manifest(&name, false, &signals.dir));
        signals.wait_for(&name, TIMEOUT)?;
        let pid = task_pid(node, &agent, &name)?;
        let logged = agent.log().matches("container exited").count();
        let (killed_at, killed) = (SystemTime::now(), Instant::now());
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL)
            .context("kill the container's process")?;
        let running = signals.wait_for(&name, TIMEOUT).context("the replacement never ran")?;
        pass.replaced.push(running - killed);
        pass.seen.push(exit_seen(&agent, logged)?.duration_since(killed_at).unwrap_or_default());
        std::fs::remove_file(node.manifests().join(format!("{name}.yaml")))?;
    }
    // The next pass starts another agent: this one stops its pods first.
    let deadline = Instant::now() + TIMEOUT;
    while !no_pods(&agent.get("/pods").1) || !node.containers().is_empty() {
        if Instant::now() > deadline {
            bail!("the pass's pods were not all stopped within {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(pass)
}

fn no_pods(list: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(list)
        .is_ok_and(|l| l["items"].as_array().is_some_and(Vec::is_empty))
}

/// Whether the agent says (in `/metrics`) that its BPF programs are loaded.
fn ebpf_loaded(agent: &Agent) -> bool {
    agent.get("/metrics").1.lines().any(|l| l.trim() == "outpost_ebpf_loaded 1")
}

/// The pid of the running task of pod `name`'s container (from `ctr tasks list`).
fn task_pid(node: &Node, agent: &Agent, name: &str) -> anyhow::Result<i32> {
    // The container can announce itself before the agent has published its status.
    let pod = outpost_tests::pods::wait_pod(agent, &format!("{name}-edge-1"), TIMEOUT, |p| {
        p["status"]["containerStatuses"][0]["state"]["running"].is_object()
    });
    let id = pod["status"]["containerStatuses"][0]["containerID"]
        .as_str()
        .map(|id| id.trim_start_matches("containerd://").to_owned())
        .context("the pod's container ID in /pods")?;
    for line in node.ctr(&["tasks", "list"]).lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.first() == Some(&id.as_str()) {
            return fields.get(1).context("pid column")?.parse().context("pid");
        }
    }
    bail!("no task for container {id}")
}

/// When the agent logged the exit that follows the first `before` ones.
fn exit_seen(agent: &Agent, before: usize) -> anyhow::Result<SystemTime> {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let log = agent.log();
        if let Some(line) = log.lines().filter(|l| l.contains("container exited")).nth(before) {
            let stamp = line.split_whitespace().next().unwrap_or_default();
            let at: jiff::Timestamp =
                stamp.parse().with_context(|| format!("log time {stamp:?}"))?;
            return Ok(SystemTime::from(at));
        }
        if Instant::now() > deadline {
            bail!("the agent never logged the exit");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
