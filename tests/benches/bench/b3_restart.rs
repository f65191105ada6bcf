//! B3 restart: a container's process is killed (SIGKILL, restartPolicy Always, its first
//! restart) → the agent sees the exit → the replacement's process runs (its FIFO
//! announcement). Two passes, side by side: the agent with its BPF programs (the
//! kernel's exit tracepoint and containerd's event stream, whichever comes first), and
//! with `--ebpf=false` (containerd's event stream alone).
//!
//! Only a container's first restart is immediate (later ones wait for the crash-loop
//! backoff by design), so every container is killed once: a pass starts its pods at
//! once, each with [`CONTAINERS`] containers, then kills one container at a time, the
//! pods in turn, and waits for the replacement to run and its status to be published
//! before the next kill: no exit queues behind another's work.
//!
//! "Seen" is the agent's `container exited` log line, stamped when its pod worker takes
//! the exit (the stamp is taken before the line is written). The same line says how long
//! after the exit's own stamp (the kernel's exit tracepoint, or the shim's reap) that
//! was (`after_us`): the split between the kernel's part (kill → exit, the killed
//! process being scheduled to die) and the agent's, reported in the details.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use outpost_tests::agent::Agent;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::Node;

use crate::Options;
use crate::report::{Entry, Stats};
use crate::signal::{Signals, announce};

const TIMEOUT: Duration = Duration::from_secs(60);
/// Starting a pass's pods (hundreds of containers) takes longer.
const START_TIMEOUT: Duration = Duration::from_secs(300);
/// Containers per pod: one sandbox serves ten first restarts.
const CONTAINERS: usize = 10;
/// How often a sample asks whether the replacement's status is out: the agent answering
/// is work of its own, kept small.
const POLL: Duration = Duration::from_millis(20);
/// The agent idles this long before the next kill: what it did for the last sample
/// (the restart, answering the polls) has settled, in the kernel's scheduler too (a
/// thread that just ran a lot waits longer on its next wake-up).
const QUIET: Duration = Duration::from_millis(50);
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
    // 50 exits a pass in about a minute; 200 for a p99 that is not the maximum.
    let pods = if options.quick { 5 } else { 20 };
    let node = Node::try_new().map_err(|what| anyhow::anyhow!("B3 needs {what}"))?;
    let signals = Signals::new(&node.path("signal"))?;
    let kernel = pass(&node, &signals, Exits::Ebpf, pods)?;
    let containerd = pass(&node, &signals, Exits::ContainerdOnly, pods)?;
    Ok(vec![
        kernel.seen_entry(
            "restart: process killed → agent sees the exit (eBPF + containerd)",
            0.5,
            "p99 < 0.5 ms",
        ),
        containerd.seen_entry(
            "restart: process killed → agent sees the exit (containerd events only, --ebpf=false)",
            3.0,
            "p99 < 3 ms",
        ),
        Entry::new(
            "B3",
            "restart: process killed → replacement running (first restart)",
            "ms",
            Stats::millis(&kernel.replaced),
        )
        .detail("pods", pods)
        .detail("containers_per_pod", CONTAINERS)
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

/// One pass's samples.
#[derive(Debug, Default)]
struct Pass {
    /// Kill → the agent's stamp.
    seen: Vec<Duration>,
    /// The exit's own stamp → the agent's (the agent's part).
    after_exit: Vec<Duration>,
    /// Kill → the exit's own stamp (the kernel's part, and the shim's without BPF).
    to_exit: Vec<Duration>,
    /// Which side reported each exit first.
    by: HashMap<String, usize>,
    replaced: Vec<Duration>,
    pods: usize,
}

impl Pass {
    fn seen_entry(&self, name: &str, limit_ms: f64, target: &str) -> Entry {
        let split = |d: &[Duration]| serde_json::to_value(Stats::millis(d)).unwrap_or_default();
        Entry::new("B3", name, "ms", Stats::millis(&self.seen))
            .p99_below(limit_ms, target)
            .detail("pods", self.pods)
            .detail("containers_per_pod", CONTAINERS)
            .detail("kill_to_exit_stamp_ms", split(&self.to_exit))
            .detail("exit_stamp_to_seen_ms", split(&self.after_exit))
            .detail("reported_first_by", serde_json::to_value(&self.by).unwrap_or_default())
    }
}

/// A container the pass kills: its pod, name, id and pid.
#[derive(Debug, Clone)]
struct Target {
    pod: String,
    container: String,
    id: String,
    pid: i32,
}

/// One agent, `pods` pods of [`CONTAINERS`] containers, each container killed once.
fn pass(node: &Node, signals: &Signals, exits: Exits, pods: usize) -> anyhow::Result<Pass> {
    let mut args = node.args();
    if exits == Exits::ContainerdOnly {
        args.push("--ebpf=false".into());
    }
    let agent = Agent::start_pods(&node.manifests(), &args);
    if exits == Exits::Ebpf && !ebpf_loaded(&agent) {
        bail!("the agent did not load its BPF programs: B3 cannot measure the eBPF path");
    }
    let prefix = if exits == Exits::Ebpf { "b3k" } else { "b3c" };
    let names: Vec<String> = (0..pods).map(|i| format!("{prefix}-{i}")).collect();
    for name in &names {
        node.put(&format!("{name}.yaml"), &manifest(name, &signals.dir));
    }
    let expected = names.iter().flat_map(|pod| (0..CONTAINERS).map(move |c| signal(pod, c)));
    wait_for_all(signals, expected.collect(), START_TIMEOUT)?;
    let targets = targets(node, &agent, &names)?;
    let mut pass = Pass { pods, ..Pass::default() };
    // The pods in turn: each pod's worker has long been idle when its next container dies.
    for c in 0..CONTAINERS {
        for target in targets.iter().filter(|t| t.container == container_name(c)) {
            sample(&agent, signals, target, c, &mut pass)?;
        }
    }
    for name in &names {
        std::fs::remove_file(node.manifests().join(format!("{name}.yaml")))?;
    }
    // The next pass starts another agent: this one stops its pods first.
    let deadline = Instant::now() + START_TIMEOUT;
    while !no_pods(&agent.get("/pods").1) || !node.containers().is_empty() {
        if Instant::now() > deadline {
            bail!("the pass's pods were not all stopped within {START_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(pass)
}

/// Kills `target`, waits for its replacement to run and for the agent to publish it,
/// and records the times.
fn sample(
    agent: &Agent,
    signals: &Signals,
    target: &Target,
    c: usize,
    pass: &mut Pass,
) -> anyhow::Result<()> {
    let (killed_at, killed) = (SystemTime::now(), Instant::now());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(target.pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .with_context(|| format!("kill {}'s process {}", target.container, target.pid))?;
    let running = signals.wait_for(&signal(&target.pod, c), TIMEOUT).with_context(|| {
        format!("{}/{}: the replacement never ran", target.pod, target.container)
    })?;
    pass.replaced.push(running - killed);
    let seen = exit_seen(agent, &target.id)?;
    pass.seen.push(seen.at.duration_since(killed_at).unwrap_or_default());
    // An exit without a stamp of its own (containerd sent none) has no split.
    if let Some(after_exit) = seen.after_exit {
        pass.after_exit.push(after_exit);
        let exit = seen.at.checked_sub(after_exit).unwrap_or(seen.at);
        pass.to_exit.push(exit.duration_since(killed_at).unwrap_or_default());
    }
    *pass.by.entry(seen.by).or_default() += 1;
    // Settled: the worker has published the replacement (restart count 1).
    let path = format!("/pods/default/{}-edge-1", target.pod);
    let deadline = Instant::now() + TIMEOUT;
    loop {
        std::thread::sleep(POLL);
        let (status, body) = agent.get(&path);
        if status == 200 && restarted(&body, &target.container) {
            break;
        }
        if Instant::now() > deadline {
            bail!("{path}: {} never showed its restart: {body}", target.container);
        }
    }
    std::thread::sleep(QUIET);
    Ok(())
}

fn container_name(c: usize) -> String {
    format!("c{c}")
}

/// What container `c` of `pod` announces when it runs.
fn signal(pod: &str, c: usize) -> String {
    format!("{pod}.{}", container_name(c))
}

/// A pod of [`CONTAINERS`] busybox containers, each announcing itself and then sleeping.
fn manifest(name: &str, signal_dir: &std::path::Path) -> String {
    let mut containers = String::new();
    for c in 0..CONTAINERS {
        let script = serde_json::to_string(&announce(&signal(name, c))).unwrap_or_default();
        containers.push_str(&format!(
            r#"  - name: {}
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", {script}]
    volumeMounts:
    - name: signal
      mountPath: /signal
"#,
            container_name(c)
        ));
    }
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  terminationGracePeriodSeconds: 0
  containers:
{containers}  volumes:
  - name: signal
    hostPath:
      path: {}
"#,
        signal_dir.display()
    )
}

/// Waits until every line of `expected` has arrived, in any order.
fn wait_for_all(
    signals: &Signals,
    mut expected: std::collections::HashSet<String>,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while !expected.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        let (line, _) = signals
            .next(left)
            .with_context(|| format!("{} containers never ran", expected.len()))?;
        expected.remove(&line);
    }
    Ok(())
}

/// Every container of the pods `names`, once the agent shows them all running.
fn targets(node: &Node, agent: &Agent, names: &[String]) -> anyhow::Result<Vec<Target>> {
    let deadline = Instant::now() + START_TIMEOUT;
    let mut ids = Vec::new();
    for pod in names {
        let path = format!("/pods/default/{pod}-edge-1");
        let statuses = loop {
            let (status, body) = agent.get(&path);
            let value: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            let statuses = value["status"]["containerStatuses"].as_array().cloned();
            if status == 200
                && let Some(statuses) = statuses
                && statuses.len() == CONTAINERS
                && statuses.iter().all(|s| s["state"]["running"].is_object())
            {
                break statuses;
            }
            if Instant::now() > deadline {
                bail!("{path}: not every container shows running: {body}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        for status in statuses {
            let id = status["containerID"]
                .as_str()
                .map(|id| id.trim_start_matches("containerd://").to_owned())
                .context("a container ID in the pod's status")?;
            let container = status["name"].as_str().context("a container name")?.to_owned();
            ids.push((pod.clone(), container, id));
        }
    }
    let pids: HashMap<String, i32> = node
        .ctr(&["tasks", "list"])
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let id = fields.next()?.to_owned();
            Some((id, fields.next()?.parse().ok()?))
        })
        .collect();
    ids.into_iter()
        .map(|(pod, container, id)| {
            let pid = *pids.get(&id).with_context(|| format!("no task for container {id}"))?;
            Ok(Target { pod, container, id, pid })
        })
        .collect()
}

/// Whether the pod (`GET /pods/{ns}/{name}`) shows `container` running again after one
/// restart.
fn restarted(body: &str, container: &str) -> bool {
    let Ok(pod) = serde_json::from_str::<serde_json::Value>(body) else { return false };
    pod["status"]["containerStatuses"].as_array().is_some_and(|statuses| {
        statuses.iter().any(|s| {
            s["name"] == container && s["restartCount"] == 1 && s["state"]["running"].is_object()
        })
    })
}

fn no_pods(list: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(list)
        .is_ok_and(|l| l["items"].as_array().is_some_and(Vec::is_empty))
}

/// Whether the agent says (in `/metrics`) that its BPF programs are loaded.
fn ebpf_loaded(agent: &Agent) -> bool {
    agent.get("/metrics").1.lines().any(|l| l.trim() == "outpost_ebpf_loaded 1")
}

/// The agent's `container exited` line of one exit.
#[derive(Debug)]
struct Seen {
    /// The line's stamp.
    at: SystemTime,
    /// How long after the exit's own stamp.
    after_exit: Option<Duration>,
    /// Who reported it first (`kernel`, `containerd`).
    by: String,
}

/// The agent's `container exited` line for container `id` (waiting for it).
fn exit_seen(agent: &Agent, id: &str) -> anyhow::Result<Seen> {
    let needle = format!("container_id=\"{id}\"");
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let log = agent.log();
        if let Some(line) =
            log.lines().find(|l| l.contains("container exited") && l.contains(&needle))
        {
            return parse_seen(line).with_context(|| format!("the agent's line {line:?}"));
        }
        if Instant::now() > deadline {
            bail!("the agent never logged the exit of {id}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn parse_seen(line: &str) -> anyhow::Result<Seen> {
    let stamp = line.split_whitespace().next().unwrap_or_default();
    let at: jiff::Timestamp = stamp.parse().with_context(|| format!("log time {stamp:?}"))?;
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(&format!("{name}=")))
            .map(|v| v.trim_matches('"').to_owned())
            .with_context(|| format!("no {name} field"))
    };
    let after_us = field("after_us").ok().map(|us| us.parse::<i64>()).transpose();
    // A stamp a little ahead of the agent's clock reading counts as no time at all.
    let after_exit = after_us.context("after_us")?.map(|us| us.max(0).unsigned_abs());
    Ok(Seen {
        at: SystemTime::from(at),
        after_exit: after_exit.map(Duration::from_micros),
        by: field("source")?,
    })
}
