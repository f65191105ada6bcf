//! The fleet harness (B13): `cargo xtask fleet --nodes N --minutes M [--pods-per-node P]
//! [--throttle QPS]` starts N hollow Outpost nodes (`outpost_tests::fleet`: the real
//! agent on a simulated pod runtime) in this process against one test API server, all
//! at once, gives each P API pods, lets them settle, then measures M idle minutes:
//!
//! - requests per node-minute by verb and resource, and the body bytes each way;
//! - the open watches per node, by resource;
//! - memory per hollow node: this process's RSS growth from before the nodes start to
//!   after they settle, over N (the test API server's share of each node, its watches
//!   and objects, included);
//! - the worst one-second request count over the window's mean (the Leases of nodes
//!   started in the same second renew together unless they are spread).
//!
//! Timings are figures to read, not pass/fail: the program fails only when the fleet
//! does not come up (a node never Ready, a pod never running).

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use outpost_tests::apiserver::{TestApiServer, Throttle};
use outpost_tests::fleet::{Fleet, node_name};
use serde_json::{Value, json};

/// How long the fleet may take to come up before the run fails.
const START_TIMEOUT: Duration = Duration::from_secs(600);
/// After every pod runs: the startup's last writes (status, Events) are let through
/// before the idle window.
const SETTLE: Duration = Duration::from_secs(15);
/// What the issue measured with 20 real agents (no containerd), idle.
const MEASURED_REAL_AGENTS: f64 = 6.0;

#[derive(Debug)]
struct Options {
    nodes: usize,
    minutes: f64,
    pods_per_node: usize,
    throttle: Option<f64>,
}

impl Options {
    fn parse(args: &[String]) -> anyhow::Result<Options> {
        let mut options = Options { nodes: 20, minutes: 1.0, pods_per_node: 0, throttle: None };
        let mut args = args.iter();
        while let Some(flag) = args.next() {
            let mut value = || args.next().with_context(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--nodes" => options.nodes = value()?.parse().context("--nodes")?,
                "--minutes" => options.minutes = value()?.parse().context("--minutes")?,
                "--pods-per-node" => {
                    options.pods_per_node = value()?.parse().context("--pods-per-node")?
                }
                "--throttle" => options.throttle = Some(value()?.parse().context("--throttle")?),
                // `cargo bench` passes this to harness-less programs.
                "--bench" => {}
                other => bail!(
                    "unknown argument {other}: fleet [--nodes N] [--minutes M] [--pods-per-node P] [--throttle QPS]"
                ),
            }
        }
        if options.nodes == 0 {
            bail!("--nodes must be at least 1");
        }
        Ok(options)
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The nodes' logs, on stderr, when asked for (`OUTPOST_LOG=warn`): one subscriber
    // for the whole process.
    if std::env::var_os("OUTPOST_LOG").is_some() {
        outpost::logging::init(None);
    }
    let result = Options::parse(&args).and_then(|options| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("cannot start the tokio runtime")?
            .block_on(run(options))
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("fleet: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// This process's resident memory, in KiB (`VmRSS`).
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap_or_default()
}

fn is_ready(node: &Value) -> bool {
    node.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|conditions| {
        conditions.iter().any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

fn is_running(pod: &Value) -> bool {
    pod.pointer("/status/containerStatuses/0/ready") == Some(&json!(true))
}

/// Waits until `count()` reaches `want`, or fails saying `what`; says how far it got
/// every 10 s.
async fn until(what: &str, want: usize, count: impl Fn() -> usize) -> anyhow::Result<()> {
    let start = Instant::now();
    let mut said = start;
    loop {
        let now = count();
        if now >= want {
            return Ok(());
        }
        if start.elapsed() > START_TIMEOUT {
            bail!("{what}: {now} of {want} after {START_TIMEOUT:?}");
        }
        if said.elapsed() >= Duration::from_secs(10) {
            println!("fleet: {what}: {now} of {want} after {:.0} s", start.elapsed().as_secs_f64());
            said = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn run(options: Options) -> anyhow::Result<()> {
    let n = options.nodes;
    let mut builder = TestApiServer::builder();
    if let Some(qps) = options.throttle {
        builder = builder.throttle(Throttle::per_second(qps));
    }
    let server = builder.start().await.context("cannot start the test API server")?;
    let rss_before = rss_kib();
    let started = Instant::now();
    let fleet = Fleet::start(&server, n, "warn").await.context("cannot start the fleet")?;
    let ready = || {
        let nodes = server.list("nodes", None).unwrap_or_default();
        nodes.iter().filter(|node| is_ready(node)).count()
    };
    until("nodes Ready", n, ready).await?;
    println!("fleet: {n} hollow nodes Ready in {:.1} s", started.elapsed().as_secs_f64());
    for index in 1..=n {
        for pod in 0..options.pods_per_node {
            let name = format!("{}-pod-{pod}", node_name(index));
            server
                .create(json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": { "name": name, "namespace": "default" },
                    "spec": {
                        "nodeName": node_name(index),
                        "containers": [{ "name": "main", "image": "registry.example/app:1" }],
                    },
                }))
                .with_context(|| format!("cannot create pod {name}"))?;
        }
    }
    let pods = n * options.pods_per_node;
    let running = || {
        let pods = server.list("pods", Some("default")).unwrap_or_default();
        pods.iter().filter(|pod| is_running(pod)).count()
    };
    until("pods running", pods, running).await?;
    println!(
        "fleet: {pods} API pods running {:.1} s after the start",
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(SETTLE).await;
    let rss_after = rss_kib();
    if let Some(node) = fleet.nodes.iter().find(|node| node.has_ended()) {
        bail!("hollow node {} ended before the idle window", node.name);
    }

    // The idle window: requests counted per second.
    server.reset_requests();
    let window = Duration::from_secs_f64(options.minutes * 60.0);
    let mut per_second = Vec::new();
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    ticks.tick().await;
    let (begin, mut last) = (Instant::now(), 0);
    while begin.elapsed() < window {
        ticks.tick().await;
        let total = server.total_requests();
        per_second.push(total - last);
        last = total;
    }
    let minutes = begin.elapsed().as_secs_f64() / 60.0;
    let requests = server.requests();
    let bytes = server.bytes();
    let watches = server.all_watchers();
    let throttled = server.throttled_requests();
    let node_minutes = n as f64 * minutes;

    let total: u64 = requests.values().sum();
    println!();
    println!(
        "B13 fleet, idle: {n} nodes, {} API pods per node, {minutes:.2} min",
        options.pods_per_node
    );
    println!(
        "  requests per node-minute: {:.2} (the issue's 20 real agents: {MEASURED_REAL_AGENTS:.1}; target <= 6.5)",
        total as f64 / node_minutes
    );
    for ((verb, resource), count) in &requests {
        let sent = bytes.get(&(verb.clone(), resource.clone())).copied().unwrap_or_default();
        println!(
            "    {verb:>7} {resource:<28} {:>7.2} /node-min  {:>9.0} B in  {:>9.0} B out /node-min",
            *count as f64 / node_minutes,
            sent.received as f64 / node_minutes,
            sent.sent as f64 / node_minutes,
        );
    }
    println!("  watches per node (open at the end):");
    let by_resource: BTreeMap<_, _> = watches.into_iter().filter(|(_, open)| *open > 0).collect();
    for (resource, open) in &by_resource {
        println!("    {resource:<28} {:.2}", *open as f64 / n as f64);
    }
    println!(
        "    all                          {:.2}",
        by_resource.values().sum::<usize>() as f64 / n as f64
    );
    println!(
        "  memory per hollow node: {:.0} KiB (RSS {} -> {} KiB over {n} nodes, the test API server's share included)",
        rss_after.saturating_sub(rss_before) as f64 / n as f64,
        rss_before,
        rss_after,
    );
    let mean = total as f64 / per_second.len().max(1) as f64;
    let peak = per_second.iter().copied().max().unwrap_or_default();
    println!(
        "  fleet QPS: mean {mean:.2}, worst second {peak} ({:.1} x the mean; target <= 2 x at 1,000 nodes)",
        peak as f64 / mean.max(f64::MIN_POSITIVE)
    );
    if options.throttle.is_some() {
        println!("  throttled (429): {throttled}");
    }
    let failures: Vec<String> = fleet.stop().await.into_iter().filter_map(Result::err).collect();
    if !failures.is_empty() {
        bail!("hollow nodes failed: {}", failures.join("; "));
    }
    Ok(())
}
