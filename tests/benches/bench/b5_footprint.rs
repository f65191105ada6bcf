//! B5 footprint: the real `outpost` binary (its own process, against the external test
//! containerd) with 0, then 10, then 100 running pods (the same pods kept across the
//! steps, each with pod networking), and once more at 10 pods with a kubeconfig to the
//! test API server (the sync's lease, node status, pod status and mirror timers).
//!
//! Each step waits until every pod runs (polling the agent's `/pods`: the benchmark's
//! polling, stopped before the window), lets the agent settle, then measures over an
//! idle window (60 s, `--quick` 10 s) without a request to the agent, from `/proc` only:
//!
//! - RSS: `VmRSS` (and `VmHWM`) of `/proc/<pid>/status` at the end of the window;
//! - CPU: the `utime + stime` delta of `/proc/<pid>/stat`, as % of one core;
//! - wakeups/s: the delta of the times each thread was scheduled (third field of
//!   `/proc/<pid>/task/*/schedstat`, summed) per second, with the voluntary and
//!   involuntary context switches of each thread's `status` and the wakeups per thread
//!   name beside it (what woke the agent);
//! - the total RSS of the `outpost container-log` processes the shims run for the pods'
//!   containers (Outpost's footprint too, outside the agent's process).
//!
//! Targets (BENCHMARKS.md): RSS < 20 MiB at 100 pods; < 1 wakeup/s idle at every step.
//! The pods are removed at the end and the agent must leave no container, task, network
//! namespace or cgroup of theirs behind (an error otherwise).

pub mod procfs;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use outpost_tests::agent::Agent;
use outpost_tests::cluster::ApiNode;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::Node;

use crate::Options;
use crate::report::{Entry, Stats};
use procfs::{Delta, Memory, Sample};

/// The names of this benchmark's pods start with it.
const PREFIX: &str = "fp-";
/// The pod counts measured without a kubeconfig, in order (the same pods carried over).
const STEPS: [usize; 3] = [0, 10, 100];
/// The pod count measured with a kubeconfig.
const API_PODS: usize = 10;
const TARGET_RSS_MIB: f64 = 20.0;
const RSS_TARGET_PODS: usize = 100;
const TARGET_WAKEUPS: f64 = 1.0;
/// How long all pods may take to run, or to go.
pub const PATIENCE: Duration = Duration::from_secs(300);

pub fn run(options: &Options) -> anyhow::Result<Vec<Entry>> {
    let window = Duration::from_secs(if options.quick { 10 } else { 60 });
    // Past the agent's work for the last change, and past tokio's 10 s keep-alive of idle
    // blocking threads, whose exits would otherwise fall into the window.
    let settle = Duration::from_secs(if options.quick { 5 } else { 15 });
    let mut entries = Vec::new();

    let node = Node::try_new().map_err(|what| anyhow::anyhow!("B5 needs {what}"))?;
    let agent = node.start();
    let mut uids = Vec::new();
    let mut present = 0;
    for count in STEPS {
        for i in present..count {
            node.put(&format!("fp-{i:03}.yaml"), &manifest(i));
        }
        present = count;
        uids = wait_running(&agent, PREFIX, count)?;
        std::thread::sleep(settle);
        let measured = measure(&agent, &node.path("logs"), window)?;
        entries.extend(measured.entries(&format!("{count} pods"), count == RSS_TARGET_PODS));
    }
    if let Err(error) = teardown(&node, agent, &uids, PREFIX) {
        return Ok(failed(entries, &error));
    }
    drop(node);

    let cluster = ApiNode::try_new().map_err(|what| anyhow::anyhow!("B5 needs {what}"))?;
    let agent = cluster.start(&[]);
    for i in 0..API_PODS {
        cluster.node.put(&format!("fp-{i:03}.yaml"), &manifest(i));
    }
    let uids = wait_running(&agent, PREFIX, API_PODS)?;
    std::thread::sleep(settle);
    let measured = measure(&agent, &cluster.node.path("logs"), window)?;
    entries.extend(measured.entries(&format!("{API_PODS} pods, kubeconfig"), false));
    if let Err(error) = teardown(&cluster.node, agent, &uids, PREFIX) {
        return Ok(failed(entries, &error));
    }
    Ok(entries)
}

/// The figures measured so far, the last one marked with the teardown's failure.
pub fn failed(mut entries: Vec<Entry>, error: &anyhow::Error) -> Vec<Entry> {
    if let Some(last) = entries.pop() {
        entries.push(last.error(format!("teardown: {error:#}")));
    }
    entries
}

/// A pod with one container that sleeps, on the pod network.
fn manifest(i: usize) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: fp-{i:03}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: main
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: ["sleep", "1000000"]
"#
    )
}

/// The agent's pods (`/pods` items) whose names start with `prefix`.
pub fn bench_pods(agent: &Agent, prefix: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    let (status, body) = agent.get("/pods");
    ensure!(status == 200, "GET /pods answered {status}: {body}");
    let list: serde_json::Value = serde_json::from_str(&body).context("/pods is not JSON")?;
    let items = list["items"].as_array().cloned().unwrap_or_default();
    Ok(items
        .into_iter()
        .filter(|p| p["metadata"]["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
        .collect())
}

/// The UIDs of the bench pods (names starting with `prefix`) in `/pods`.
pub fn bench_uids(agent: &Agent, prefix: &str) -> anyhow::Result<Vec<String>> {
    Ok(uids(&bench_pods(agent, prefix)?))
}

fn uids(pods: &[serde_json::Value]) -> Vec<String> {
    pods.iter().filter_map(|p| p["metadata"]["uid"].as_str().map(str::to_owned)).collect()
}

/// Polls `/pods` until exactly `count` bench pods (names starting with `prefix`) are there
/// and all of their containers run; their UIDs.
pub fn wait_running(agent: &Agent, prefix: &str, count: usize) -> anyhow::Result<Vec<String>> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let pods = bench_pods(agent, prefix)?;
        let running = pods
            .iter()
            .filter(|p| p["status"]["containerStatuses"][0]["state"]["running"].is_object())
            .count();
        if pods.len() == count && running == count {
            return Ok(uids(&pods));
        }
        if Instant::now() > deadline {
            bail!("{running} of {count} pods running after {PATIENCE:?} ({} present)", pods.len());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One idle window's figures.
#[derive(Debug)]
struct Measured {
    window: Duration,
    delta: Delta,
    rss_mib: f64,
    hwm_mib: f64,
    anon_mib: f64,
    pss_mib: f64,
    logs: Vec<Memory>,
    log_lines: usize,
}

/// Samples `/proc` at the start and the end of `window`, touching nothing else.
fn measure(agent: &Agent, log_dir: &Path, window: Duration) -> anyhow::Result<Measured> {
    let pid = agent.pid();
    let logged = agent.log().lines().count();
    let start = Sample::take(pid)?;
    std::thread::sleep(window);
    let end = Sample::take(pid)?;
    Ok(Measured {
        window,
        delta: Delta::between(&start, &end),
        rss_mib: procfs::memory_mib(pid, "VmRSS")?,
        hwm_mib: procfs::memory_mib(pid, "VmHWM")?,
        anon_mib: procfs::memory_mib(pid, "RssAnon")?,
        pss_mib: procfs::pss_mib(pid)?,
        logs: procfs::log_processes(log_dir),
        log_lines: agent.log().lines().count() - logged,
    })
}

impl Measured {
    fn entries(&self, step: &str, rss_target: bool) -> Vec<Entry> {
        let d = &self.delta;
        let secs = self.window.as_secs();
        let round = |v: f64| (v * 1000.0).round() / 1000.0;
        let rss = Entry::new(
            "B5",
            format!("footprint: agent RSS, {step}"),
            "MiB",
            Stats::of(vec![self.rss_mib]),
        )
        .detail("hwm_mib", round(self.hwm_mib))
        .detail("anon_mib", round(self.anon_mib))
        .detail("pss_mib", round(self.pss_mib))
        .detail("threads", d.threads_end);
        let rss = if rss_target {
            rss.p99_below(TARGET_RSS_MIB, "< 20 MiB")
        } else {
            rss.target("(target at 100 pods)", true)
        };
        let cpu = Entry::new(
            "B5",
            format!("footprint: agent CPU over {secs} s idle, {step}"),
            "% core",
            Stats::of(vec![d.cpu_percent]),
        )
        .target("(none)", true)
        .detail("on_cpu_ms_schedstat", round(d.run_ms));
        let by_thread: Vec<String> = d.by_comm.iter().map(|(c, n)| format!("{c}:{n}")).collect();
        let wakeups = Entry::new(
            "B5",
            format!("footprint: agent wakeups over {secs} s idle, {step}"),
            "/s",
            Stats::of(vec![d.wakeups_per_s()]),
        )
        .p99_below(TARGET_WAKEUPS, "< 1/s")
        .detail("scheduled", d.scheduled)
        .detail("voluntary_switches", d.voluntary)
        .detail("involuntary_switches", d.involuntary)
        .detail("by_thread", by_thread.join(" "))
        .detail("threads_exited", d.threads_exited)
        .detail("threads_born", (d.threads_end + d.threads_exited).saturating_sub(d.threads_start))
        .detail("log_lines", self.log_lines);
        let sum = |f: fn(&Memory) -> f64| round(self.logs.iter().map(f).sum());
        let logs = Entry::new(
            "B5",
            format!("footprint: container-log processes RSS (total), {step}"),
            "MiB",
            Stats::of(vec![sum(|m| m.rss)]),
        )
        .target("(none; outside the agent's process)", true)
        .detail("processes", self.logs.len())
        .detail("pss_total_mib", sum(|m| m.pss))
        .detail("anon_total_mib", sum(|m| m.anon));
        vec![rss, cpu, wakeups, logs]
    }
}

/// Removes the pods, waits until the agent has torn them down, stops it, and checks that
/// nothing of theirs is left: containers, tasks, pod dirs, network namespaces, CNI
/// allocations, cgroups. `prefix` names the benchmark's pods.
pub fn teardown(node: &Node, agent: Agent, uids: &[String], prefix: &str) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(node.manifests())?.flatten() {
        std::fs::remove_file(entry.path())?;
    }
    // `/pods` drops a pod once it is no longer desired; its containers go after that, then
    // its sandbox (network, cgroups, dirs): stopping the agent before that ends would
    // leave the rest for the next start.
    let deadline = Instant::now() + PATIENCE;
    let torn_down =
        || node.containers().is_empty() && uids.iter().all(|uid| node.leftovers(uid).is_empty());
    while !(bench_pods(&agent, prefix)?.is_empty() && torn_down()) {
        if Instant::now() > deadline {
            let containers = node.containers();
            let left: Vec<String> = uids.iter().flat_map(|uid| node.leftovers(uid)).collect();
            bail!(
                "left {PATIENCE:?} after the pods went: containers {containers:?}, sandboxes {left:?}"
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    agent.stop();
    let tasks = node.tasks();
    ensure!(tasks.is_empty(), "tasks left after the pods went: {tasks:?}");
    let left: Vec<String> = uids.iter().flat_map(|uid| node.leftovers(uid)).collect();
    ensure!(left.is_empty(), "left after the pods went: {left:?}");
    let mounts = std::fs::read_to_string("/proc/self/mounts").context("/proc/self/mounts")?;
    let root = node.dir.path().to_string_lossy().into_owned();
    let netns: Vec<&str> = mounts
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter(|m| m.starts_with(&root) && m.contains("/pods/"))
        .collect();
    ensure!(netns.is_empty(), "pod namespaces still mounted: {netns:?}");
    Ok(())
}
