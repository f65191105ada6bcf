//! The fleet harness (B13): `cargo xtask fleet [--client outpost|kubelet] [--nodes N]
//! [--minutes M] [--pods-per-node P] [--outage SECONDS[,SECONDS...]] [--throttle QPS]
//! [--history EVENTS] [--lease-duration-seconds S] [--capacity SECONDS [--clients C]]`
//! runs the scenario of `outpost_tests::fleet::scenario` (N nodes, all at once, on one
//! test API server, P API pods each; an idle window of M minutes; then each whole-fleet
//! outage in turn) and prints its figures:
//!
//! - idle: requests per node-minute by verb and resource with their bytes, the open
//!   watches per node, the memory per node, the worst second over the mean;
//! - each outage, from the restore: requests per second and by verb and resource, the
//!   peak second, the total, the requests beyond idle per pod and per node against the
//!   reconnect target, the seconds until every node and every pod is synced, the slowest
//!   node's first write against its backoff's cap, and the 429s under `--throttle`.
//!
//! With `--capacity`, it measures instead the test API server's own rate
//! (`outpost_tests::fleet::load`): N nodes' Leases, Node and pod statuses and Events
//! written over C connections for SECONDS, with each node's two watches open.
//!
//! This program parses arguments and prints; the scenario measures. It fails only when
//! the fleet does not come up.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use outpost_tests::fleet::load::{self, Load};
use outpost_tests::fleet::scenario::{self, Client, Figures, Outage, Scenario};

/// What the issue measured with 20 real agents (no containerd), idle.
const MEASURED_REAL_AGENTS: f64 = 6.0;
const USAGE: &str = "fleet [--client outpost|kubelet] [--nodes N] [--minutes M] [--pods-per-node P] [--outage SECONDS[,SECONDS...]] [--throttle QPS] [--history EVENTS] [--lease-duration-seconds S] [--capacity SECONDS [--clients C]]";

/// What the command line asks: a scenario, or the server's capacity.
enum Run {
    Scenario(Scenario),
    Capacity(Load),
}

fn parse(args: &[String]) -> anyhow::Result<Run> {
    let mut scenario = Scenario::new(Client::Outpost, 20);
    let (mut capacity, mut clients) = (None, 100);
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--client" => {
                scenario.client = match value()?.as_str() {
                    "outpost" => Client::Outpost,
                    "kubelet" => Client::Kubelet,
                    other => bail!("--client {other}: outpost or kubelet"),
                }
            }
            "--nodes" => scenario.nodes = value()?.parse().context("--nodes")?,
            "--minutes" => {
                let minutes: f64 = value()?.parse().context("--minutes")?;
                scenario.idle = Duration::try_from_secs_f64(minutes * 60.0).context("--minutes")?;
            }
            "--pods-per-node" => {
                scenario.pods_per_node = value()?.parse().context("--pods-per-node")?
            }
            "--outage" => {
                for seconds in value()?.split(',') {
                    let seconds: u64 = seconds.trim().parse().context("--outage")?;
                    scenario.outages.push(Duration::from_secs(seconds));
                }
            }
            "--throttle" => scenario.throttle = Some(value()?.parse().context("--throttle")?),
            "--history" => scenario.history = Some(value()?.parse().context("--history")?),
            "--lease-duration-seconds" => {
                let seconds = value()?.parse().context("--lease-duration-seconds")?;
                scenario.lease_duration_seconds = Some(seconds);
            }
            "--capacity" => {
                let seconds: f64 = value()?.parse().context("--capacity")?;
                capacity = Some(Duration::try_from_secs_f64(seconds).context("--capacity")?);
            }
            "--clients" => clients = value()?.parse().context("--clients")?,
            // `cargo bench` passes this to harness-less programs.
            "--bench" => {}
            other => bail!("unknown argument {other}: {USAGE}"),
        }
    }
    if scenario.nodes == 0 {
        bail!("--nodes must be at least 1");
    }
    Ok(match capacity {
        Some(duration) => Run::Capacity(Load {
            nodes: scenario.nodes,
            pods_per_node: scenario.pods_per_node,
            clients,
            duration,
        }),
        None => Run::Scenario(scenario),
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The nodes' logs, on stderr, when asked for (`OUTPOST_LOG=warn`): one subscriber
    // for the whole process.
    if std::env::var_os("OUTPOST_LOG").is_some() {
        outpost::logging::init(None);
    }
    let result = parse(&args).and_then(|run| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("cannot start the tokio runtime")?;
        let scenario = match run {
            Run::Scenario(scenario) => scenario,
            Run::Capacity(load) => {
                let capacity = runtime.block_on(load::measure(&load))?;
                print_capacity(&load, &capacity);
                return Ok(());
            }
        };
        let say = |line: String| println!("fleet: {line}");
        let figures = runtime.block_on(scenario::run(&scenario, &say))?;
        print_idle(&figures);
        for outage in &figures.outages {
            print_outage(outage, figures.throttle);
        }
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("fleet: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn print_idle(figures: &Figures) {
    let (n, idle) = (figures.nodes, &figures.idle);
    let node_minutes = n as f64 * idle.seconds / 60.0;
    println!();
    println!(
        "B13 fleet, idle: {n} {} nodes, {} API pods per node, {:.2} min{}{}",
        figures.client.name(),
        figures.pods_per_node,
        idle.seconds / 60.0,
        figures.throttle.map(|qps| format!(", throttled at {qps} QPS")).unwrap_or_default(),
        figures
            .history
            .map(|events| format!(", a watch history of {events} events"))
            .unwrap_or_default(),
    );
    if let Some(seconds) = figures.lease_duration_seconds {
        println!("  nodeLeaseDurationSeconds {seconds} (kubelet's default: 40)");
    }
    println!(
        "  Ready in {:.1} s, pods running {:.1} s after the start",
        figures.ready_after.as_secs_f64(),
        figures.running_after.as_secs_f64()
    );
    println!(
        "  requests per node-minute: {:.2} (the issue's 20 real agents: {MEASURED_REAL_AGENTS:.1}; target <= 6.5)",
        figures.requests_per_node_minute()
    );
    for ((verb, resource), count) in &idle.requests {
        let sent = idle.bytes.get(&(verb.clone(), resource.clone())).copied().unwrap_or_default();
        println!(
            "    {verb:>7} {resource:<28} {:>7.2} /node-min  {:>9.0} B in  {:>9.0} B out /node-min",
            *count as f64 / node_minutes,
            sent.received as f64 / node_minutes,
            sent.sent as f64 / node_minutes,
        );
    }
    println!("  watches per node (open at the end):");
    for (resource, open) in &idle.watches {
        println!("    {resource:<28} {:.2}", *open as f64 / n as f64);
    }
    println!(
        "    all                          {:.2}",
        idle.watches.values().sum::<usize>() as f64 / n as f64
    );
    println!(
        "  memory per node: {:.0} KiB (the process's RSS growth over {n} nodes, the test API server's share included)",
        figures.memory_per_node_kib
    );
    let mean = idle.qps();
    let peak = idle.per_second.iter().copied().max().unwrap_or_default();
    println!(
        "  fleet QPS: mean {mean:.2}, worst second {peak} ({:.1} x the mean; target <= 2 x at 1,000 nodes)",
        peak as f64 / mean.max(f64::MIN_POSITIVE)
    );
    if figures.throttle.is_some() {
        println!("  throttled (429): {}", idle.throttled);
    }
}

fn print_capacity(load: &Load, capacity: &load::Capacity) {
    println!(
        "B13 harness: the test API server served {:.0} requests/s ({} in {:.1} s; {} nodes, {} pods each, {} writing connections, {} watches open; {} failed)",
        capacity.per_second(),
        capacity.total(),
        capacity.seconds,
        load.nodes,
        load.pods_per_node,
        load.clients.min(load.nodes),
        capacity.watches,
        capacity.failed,
    );
    for (what, count) in &capacity.served {
        println!("    {what:<22} {:>8.0} /s", *count as f64 / capacity.seconds);
    }
}

fn seconds(at: Option<Duration>) -> String {
    at.map_or_else(|| "never".to_owned(), |at| format!("{:.1} s", at.as_secs_f64()))
}

fn print_outage(outage: &Outage, throttle: Option<f64>) {
    println!();
    println!(
        "B13 fleet, outage of {} s: {} nodes, {} API pods (each container exited once during it){}",
        outage.length.as_secs(),
        outage.nodes,
        outage.pods,
        throttle.map(|qps| format!(", throttled at {qps} QPS")).unwrap_or_default(),
    );
    let synced = outage.synced_after();
    println!(
        "  synced: every Lease {}, every node (Lease, Ready) {}, every pod (restart shown) {}; all {} (target < 60 s)",
        seconds(outage.leases_after),
        seconds(outage.nodes_after),
        seconds(outage.pods_after),
        seconds(synced),
    );
    if synced.is_none() {
        println!(
            "  NOT synced when the count stopped: {} nodes, {} pods",
            outage.unsynced_nodes, outage.unsynced_pods
        );
    }
    if let Some((node, at)) = &outage.slowest_first_write {
        println!(
            "  slowest first write after the restore: {node} at {:.1} s (its backoff's cap: {} s)",
            at.as_secs_f64(),
            outage.backoff_cap.as_secs()
        );
    }
    let (at, peak) = outage.peak();
    let idle = outage.idle_qps.max(f64::MIN_POSITIVE);
    println!(
        "  requests: {} in {:.0} s from the restore; peak {peak} in second {at} ({:.1} x the idle QPS {:.2}; target <= 10 x)",
        outage.total(),
        outage.window_seconds(),
        peak as f64 / idle,
        outage.idle_qps,
    );
    let beyond = outage.beyond_idle();
    let per_pod = if outage.pods > 0 {
        format!("{:.2}", beyond / outage.pods as f64)
    } else {
        "-".to_owned()
    };
    println!(
        "  beyond idle: {beyond:.0} (per pod {per_pod}, per node {:.2}); target <= 2 per pod + 5 per node = {:.0}: {}",
        beyond / outage.nodes as f64,
        outage.budget(),
        if beyond <= outage.budget() { "met" } else { "MISSED" },
    );
    println!(
        "  beyond idle, Events left out: {:.0} (per pod {})",
        outage.beyond_idle_except("events"),
        if outage.pods > 0 {
            format!("{:.2}", outage.beyond_idle_except("events") / outage.pods as f64)
        } else {
            "-".to_owned()
        },
    );
    println!("  nodes whose Node was written after the restore: {}", outage.node_writes);
    if throttle.is_some() {
        println!("  throttled (429): {}", outage.throttled);
    }
    for ((verb, resource), count) in &outage.requests {
        println!("    {verb:>7} {resource:<28} {count:>7}");
    }
    let totals: Vec<String> =
        outage.seconds.iter().map(|second| second.values().sum::<u64>().to_string()).collect();
    println!("  per second from the restore: {}", totals.join(" "));
    if let Some(second) = outage.seconds.get(at) {
        let of: Vec<String> = second.iter().map(|((v, r), n)| format!("{v} {r} {n}")).collect();
        println!("  the peak second (second {at}): {}", of.join(", "));
    }
}
