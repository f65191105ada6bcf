//! B5 footprint: the real `outpost` binary (its own process, against the external test
//! containerd) with 0, then 10, then 100 running pods (`--quick`: 0 and 10; the same pods
//! kept across the steps, each with pod networking), and once more at 10 pods with a kubeconfig to the
//! test API server (the sync's lease, node status, pod status and mirror timers), and
//! last at 100 pods (`--quick`: 10) with `--shim-grouping node` (one runc shim for the
//! node's containers instead of one per pod: the per-container figures that change).
//!
//! Each step waits until every pod runs (polling the agent's `/pods`: the benchmark's
//! polling, stopped before the window), lets the agent settle, then measures over an
//! idle window (60 s, `--quick` 10 s) without a request to the agent, from `/proc` only:
//!
//! - RSS: `VmRSS` (and `VmHWM`) of `/proc/<pid>/status` at the end of the window, with
//!   where it is (`smaps`: the binary's code, the heap, malloc's arenas, stacks;
//!   [`outpost_tests::smaps`]);
//! - the peak at start: `VmHWM` at the 0-pod step, before any pod, with the BPF programs
//!   loaded (the agent's log says whether they were);
//! - CPU: the `utime + stime` delta of `/proc/<pid>/stat`, as % of one core;
//! - wakeups/s: the delta of the times each thread was scheduled (third field of
//!   `/proc/<pid>/task/*/schedstat`, summed) per second, with the voluntary and
//!   involuntary context switches of each thread's `status` and the wakeups per thread
//!   name beside it (what woke the agent);
//! - everything Outpost adds: the PSS (`smaps_rollup`) of the agent, of the container
//!   loggers and of containerd's shims serving the agent's namespace ([`helpers`]); and
//!   per container, the loggers' and shims' PSS over the number of containers.
//!
//! The arm64 distribution binary's size is read from the size ledger ([`binary`]):
//! building it here would take longer than the rest of the benchmark.
//!
//! Side by side, after Outpost's pods are gone: podman ([`Podman`]) runs the same number
//! of pods (10, then 100: pod create + run, each an infra and an app container), and
//! its conmon processes' PSS per container is the baseline of Outpost's per-container
//! figures.
//!
//! Targets (BENCHMARKS.md): agent RSS < 20 MiB and everything Outpost adds < 30 MiB PSS
//! at 100 pods; per-container overhead (loggers + shims) ≤ 2 MiB PSS; the logger's PSS
//! per container ≤ conmon's; < 0.25 wakeup/s idle at every step; VmHWM at start < 25 MiB
//! with BPF; the arm64 distribution binary ≤ 18 MiB.
//! The pods are removed at the end and the agent must leave no container, task, network
//! namespace or cgroup of theirs behind (an error otherwise); podman's are removed too.

pub mod binary;
pub mod helpers;
pub mod procfs;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use outpost_tests::agent::Agent;
use outpost_tests::apiserver::TestApiServer;
use outpost_tests::cluster::ApiNode;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::podman::Podman;
use outpost_tests::pods::Node;
use outpost_tests::smaps::Breakdown;

use crate::Options;
use crate::bench::b10_burst::PODMAN_PARALLELISM;
use crate::report::{Entry, Stats};
use helpers::{Helpers, total};
use procfs::{Delta, Memory, Sample};

/// The names of this benchmark's pods start with it.
pub const PREFIX: &str = "fp-";
/// The pod counts measured without a kubeconfig, in order (the same pods carried over).
const STEPS: [usize; 3] = [0, 10, 100];
/// `--quick`'s: a check that each step runs (podman's 100 pods too cost minutes).
const QUICK_STEPS: [usize; 2] = [0, 10];
/// The pod count measured with a kubeconfig.
const API_PODS: usize = 10;
/// How often the test API server sends a watch BOOKMARK in the kubeconfig step:
/// kube-apiserver's watch cache sends one about every minute.
const API_BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);
const TARGET_RSS_MIB: f64 = 20.0;
const TARGET_EVERYTHING_MIB: f64 = 30.0;
const TARGET_PER_CONTAINER_MIB: f64 = 2.0;
const RSS_TARGET_PODS: usize = 100;
const TARGET_WAKEUPS: f64 = 0.25;
const TARGET_START_HWM_MIB: f64 = 25.0;
/// What the agent logs once its BPF programs are loaded (`ebpf::Handle::start`).
const BPF_LOADED: &str = "eBPF programs loaded";
/// How long all pods may take to run, or to go.
pub const PATIENCE: Duration = Duration::from_secs(300);

pub fn run(options: &Options) -> anyhow::Result<Vec<Entry>> {
    let window = Duration::from_secs(if options.quick { 10 } else { 60 });
    // Past the agent's work for the last change, and past tokio's 10 s keep-alive of idle
    // blocking threads, whose exits would otherwise fall into the window.
    let settle = Duration::from_secs(if options.quick { 5 } else { 15 });
    let mut steps = Vec::new();
    let counts: &[usize] = if options.quick { &QUICK_STEPS } else { &STEPS };

    let node = Node::try_new().map_err(|what| anyhow::anyhow!("B5 needs {what}"))?;
    let agent = node.start();
    let mut uids = Vec::new();
    let mut present = 0;
    for &count in counts {
        for i in present..count {
            node.put(&format!("fp-{i:03}.yaml"), &manifest(i));
        }
        present = count;
        uids = wait_running(&agent, PREFIX, count)?;
        std::thread::sleep(settle);
        steps.push((format!("{count} pods"), count, measure(&agent, &node, window)?));
    }
    let torn_down = teardown(&node, agent, &uids, PREFIX);
    drop(node);

    // podman's pods only once Outpost's are gone: the two never share a page.
    let conmons = conmon_footprint(&podman_dir()?, counts, settle);
    let mut entries = vec![binary::size_entry(&outpost_tests::outpost_bin())];
    if let Some((_, _, at_start)) = steps.first() {
        entries.push(at_start.start_peak());
    }
    for (step, count, measured) in &steps {
        entries.extend(measured.entries(step, *count, *count == RSS_TARGET_PODS, &conmons));
    }
    if let Err(error) = torn_down {
        return Ok(failed(entries, &error));
    }
    if let Err(error) = &conmons {
        entries.push(
            Entry::new("B5", "footprint: podman's conmon per container", "MiB", Stats::of(vec![]))
                .error(format!("{error:#}")),
        );
    }

    // The test API server sends a watch BOOKMARK every second (what the tests want: a
    // bookmark is how the agent sees the server reachable again); kube-apiserver's watch
    // cache sends one about every minute, and an idle agent is measured against that.
    let server = TestApiServer::builder().bookmark_interval(API_BOOKMARK_INTERVAL);
    let cluster =
        ApiNode::try_with_server(server).map_err(|what| anyhow::anyhow!("B5 needs {what}"))?;
    let agent = cluster.start(&[]);
    for i in 0..API_PODS {
        cluster.node.put(&format!("fp-{i:03}.yaml"), &manifest(i));
    }
    let uids = wait_running(&agent, PREFIX, API_PODS)?;
    std::thread::sleep(settle);
    let measured = measure(&agent, &cluster.node, window)?;
    let step = format!("{API_PODS} pods, kubeconfig");
    entries.extend(measured.entries(&step, API_PODS, false, &conmons));
    if let Err(error) = teardown(&cluster.node, agent, &uids, PREFIX) {
        return Ok(failed(entries, &error));
    }
    drop(cluster);

    // The same pods with one runc shim for the whole node instead of one per pod.
    let count = if options.quick { API_PODS } else { RSS_TARGET_PODS };
    let node = Node::try_new().map_err(|what| anyhow::anyhow!("B5 needs {what}"))?;
    let mut args = node.args();
    args.extend(["--shim-grouping".into(), "node".into()]);
    let agent = Agent::start_pods(&node.manifests(), &args);
    for i in 0..count {
        node.put(&format!("fp-{i:03}.yaml"), &manifest(i));
    }
    let uids = wait_running(&agent, PREFIX, count)?;
    std::thread::sleep(settle);
    let measured = measure(&agent, &node, window)?;
    entries.extend(measured.entries(
        &format!("{count} pods, shim grouping node"),
        count,
        false,
        &conmons,
    ));
    if let Err(error) = teardown(&node, agent, &uids, PREFIX) {
        return Ok(failed(entries, &error));
    }
    Ok(entries)
}

/// A directory for podman's storage, removed with the returned guard.
fn podman_dir() -> anyhow::Result<tempfile::TempDir> {
    tempfile::Builder::new().prefix("opn-podman").tempdir_in("/tmp").context("podman's temp dir")
}

/// The memory of podman's conmon processes with as many pods running as each step with
/// pods: pod count → one `Memory` per conmon.
fn conmon_footprint(
    dir: &tempfile::TempDir,
    counts: &[usize],
    settle: Duration,
) -> anyhow::Result<BTreeMap<usize, Vec<Memory>>> {
    let podman = Podman::new(dir.path())?;
    let mut found = BTreeMap::new();
    let mut present = 0;
    for &count in counts.iter().filter(|&&c| c > 0) {
        let names: Vec<String> = (present..count).map(|i| format!("fp-{i:03}")).collect();
        podman.pods(&names, PODMAN_PARALLELISM, &[], |_| "exec sleep 1000000".to_owned())?;
        present = count;
        std::thread::sleep(settle);
        let conmons = podman.conmons();
        // An infra and an app container per pod.
        ensure!(
            conmons.len() == 2 * count,
            "{} conmon processes for {count} podman pods, not {}",
            conmons.len(),
            2 * count
        );
        found.insert(count, helpers::memory(&conmons));
    }
    podman.remove_all()?;
    let left = podman.leftovers()?;
    ensure!(left.is_empty(), "podman left {left:?}");
    Ok(found)
}

/// The figures measured so far, the last one marked with the teardown's failure.
pub fn failed(mut entries: Vec<Entry>, error: &anyhow::Error) -> Vec<Entry> {
    if let Some(last) = entries.pop() {
        entries.push(last.error(format!("teardown: {error:#}")));
    }
    entries
}

/// A pod with one container that sleeps, on the pod network.
pub fn manifest(i: usize) -> String {
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
    breakdown: Breakdown,
    bpf_loaded: bool,
    loggers: Vec<Memory>,
    shims: Vec<Memory>,
    log_lines: usize,
}

/// Samples `/proc` at the start and the end of `window`, touching nothing else.
fn measure(agent: &Agent, node: &Node, window: Duration) -> anyhow::Result<Measured> {
    let pid = agent.pid();
    let logged = agent.log().lines().count();
    let start = Sample::take(pid)?;
    std::thread::sleep(window);
    let end = Sample::take(pid)?;
    let helpers =
        Helpers::find(&node.namespace, &node.socket, &node.path("logs"), &node.path("run"));
    Ok(Measured {
        window,
        delta: Delta::between(&start, &end),
        rss_mib: procfs::memory_mib(pid, "VmRSS")?,
        hwm_mib: procfs::memory_mib(pid, "VmHWM")?,
        anon_mib: procfs::memory_mib(pid, "RssAnon")?,
        pss_mib: procfs::pss_mib(pid)?,
        breakdown: Breakdown::of(pid)
            .with_context(|| format!("cannot read /proc/{pid}/smaps or /proc/{pid}/exe"))?,
        bpf_loaded: agent.log().contains(BPF_LOADED),
        loggers: helpers::memory(&helpers.loggers),
        shims: helpers::memory(&helpers.shims),
        log_lines: agent.log().lines().count() - logged,
    })
}

fn round(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

impl Measured {
    /// The step's entries; `conmons` is podman's conmon memory by pod count.
    fn entries(
        &self,
        step: &str,
        pods: usize,
        at_target: bool,
        conmons: &anyhow::Result<BTreeMap<usize, Vec<Memory>>>,
    ) -> Vec<Entry> {
        let d = &self.delta;
        let secs = self.window.as_secs();
        let rss = Entry::new(
            "B5",
            format!("footprint: agent RSS, {step}"),
            "MiB",
            Stats::of(vec![self.rss_mib]),
        )
        .detail("hwm_mib", round(self.hwm_mib))
        .detail("anon_mib", round(self.anon_mib))
        .detail("pss_mib", round(self.pss_mib))
        .detail("threads", d.threads_end)
        .detail("arenas", self.breakdown.arenas);
        let rss = self
            .breakdown
            .rss_mib
            .iter()
            .fold(rss, |entry, (kind, mib)| entry.detail(kind.key(), round(*mib)));
        let rss = if at_target {
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
        .p99_below(TARGET_WAKEUPS, "< 0.25/s")
        .detail("scheduled", d.scheduled)
        .detail("voluntary_switches", d.voluntary)
        .detail("involuntary_switches", d.involuntary)
        .detail("by_thread", by_thread.join(" "))
        .detail("threads_exited", d.threads_exited)
        .detail("threads_born", (d.threads_end + d.threads_exited).saturating_sub(d.threads_start))
        .detail("log_lines", self.log_lines);
        let mut entries = vec![rss, cpu, wakeups, self.everything(step, at_target)];
        if pods > 0 {
            let conmon = conmons.as_ref().ok().and_then(|c| c.get(&pods)).map(Vec::as_slice);
            entries.extend(self.per_container(step, pods, conmon));
        }
        entries
    }

    /// The agent's peak resident memory at start (`VmHWM` before any pod), which the BPF
    /// programs' loading sets.
    fn start_peak(&self) -> Entry {
        let entry = Entry::new(
            "B5",
            "footprint: agent VmHWM at start (BPF loaded)",
            "MiB",
            Stats::of(vec![round(self.hwm_mib)]),
        )
        .detail("bpf_loaded", self.bpf_loaded);
        if self.bpf_loaded {
            entry.p99_below(TARGET_START_HWM_MIB, "< 25 MiB")
        } else {
            entry.target("< 25 MiB with BPF: the BPF programs were not loaded", false)
        }
    }

    /// Everything Outpost adds: the agent's, the loggers' and the shims' PSS.
    fn everything(&self, step: &str, at_target: bool) -> Entry {
        let loggers = total(&self.loggers, |m| m.pss);
        let shims = total(&self.shims, |m| m.pss);
        let entry = Entry::new(
            "B5",
            format!("footprint: everything Outpost adds (PSS: agent + loggers + shims), {step}"),
            "MiB",
            Stats::of(vec![round(self.pss_mib + loggers + shims)]),
        )
        .detail("agent_pss_mib", round(self.pss_mib))
        .detail("loggers", self.loggers.len())
        .detail("loggers_pss_mib", round(loggers))
        .detail("loggers_rss_mib", round(total(&self.loggers, |m| m.rss)))
        .detail("shims", self.shims.len())
        .detail("shims_pss_mib", round(shims))
        .detail("shims_rss_mib", round(total(&self.shims, |m| m.rss)));
        if at_target {
            entry.p99_below(TARGET_EVERYTHING_MIB, "< 30 MiB")
        } else {
            entry.target("(target at 100 pods)", true)
        }
    }

    /// Per container (one per pod here): loggers + shims, and the logger alone, beside
    /// podman's conmon per container (`conmon`: one per podman container, infra ones
    /// included) for as many pods.
    fn per_container(&self, step: &str, pods: usize, conmon: Option<&[Memory]>) -> Vec<Entry> {
        let containers = pods as f64;
        let loggers = total(&self.loggers, |m| m.pss) / containers;
        let shims = total(&self.shims, |m| m.pss) / containers;
        let overhead = Entry::new(
            "B5",
            format!("footprint: per-container overhead (PSS: loggers + shims), {step}"),
            "MiB",
            Stats::of(vec![round(loggers + shims)]),
        )
        .p99_below(TARGET_PER_CONTAINER_MIB, "≤ 2 MiB (conmon: the baseline)")
        .detail("logger_pss_mib", round(loggers))
        .detail("shim_pss_mib", round(shims))
        .detail("logger_rss_mib", round(total(&self.loggers, |m| m.rss) / containers))
        .detail("shim_rss_mib", round(total(&self.shims, |m| m.rss) / containers));
        let logger = Entry::new(
            "B5",
            format!("footprint: logger PSS per container, {step}"),
            "MiB",
            Stats::of(vec![round(loggers)]),
        );
        let Some(conmon) = conmon.filter(|c| !c.is_empty()) else {
            let missing = "podman's conmon was not measured";
            return vec![overhead.detail("baseline", missing), logger.target(missing, false)];
        };
        let processes = conmon.len() as f64;
        let per_conmon = Stats::of(vec![round(total(conmon, |m| m.pss) / processes)]);
        let baseline = |entry: Entry| {
            entry
                .detail("conmon_processes", conmon.len())
                .detail("conmon_rss_mib", round(total(conmon, |m| m.rss) / processes))
                .detail("conmon_pss_per_pod_mib", round(total(conmon, |m| m.pss) / containers))
        };
        vec![
            baseline(overhead.beside(per_conmon)),
            baseline(logger.against(per_conmon, 1.0, "≤ podman's conmon per container")),
        ]
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
