//! B14 devices: a device plugin registers → its resource is in the Node's allocatable on
//! the API server; and a pod that limits a device starts, beside the same pod without
//! one. The agent runs as a node of the test API server; the plugins are the test device
//! plugin (`tests/device-plugin`, kubelet's `deviceplugin/v1beta1`) as processes of their
//! own, in the agent's device-plugin directory.
//!
//! - Registration: each sample starts a plugin for a resource of its own
//!   (`example.com/b14-<i>`, one device) and polls the server's Node every millisecond
//!   until its allocatable has it. The time starts when the plugin process is spawned,
//!   so it holds the plugin's own start and registration too: an upper bound of
//!   registration → allocatable.
//! - Start: static pods one at a time, written → their container's first command
//!   announcing itself on a FIFO ([`Signals`]), alternately with a device
//!   (`example.com/b14-serial: 1`, given by a plugin with a device per pod) and without.
//! - Memory: the agent's RSS before and after the plugins registered (per plugin), and
//!   after the pods without and then with devices started (the difference per allocated
//!   device). RSS moves by the allocator's pages: these are reported, not judged.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use outpost_tests::cluster::ApiNode;
use outpost_tests::device_plugin::{PluginArgs, PluginProcess, char_device};

use crate::Options;
use crate::b2_start::manifest;
use crate::b5_footprint::procfs::memory_mib;
use crate::report::{Entry, Stats};
use crate::signal::Signals;

const TIMEOUT: Duration = Duration::from_secs(60);
const NODE: &str = "edge-1";
const SERIAL: &str = "example.com/b14-serial";

pub fn run(options: &Options) -> anyhow::Result<Vec<Entry>> {
    let samples = if options.quick { 5 } else { 30 };
    let api = ApiNode::try_new().map_err(|what| anyhow::anyhow!("B14 needs {what}"))?;
    let signals = Signals::new(&api.node.path("signal"))?;
    let agent = api.start(&[]);
    let plugin_dir = api.node.path("kubelet/device-plugins");
    let devices = api.node.path("b14-dev");
    std::fs::create_dir_all(&devices)?;
    wait("the agent's kubelet.sock", || plugin_dir.join("kubelet.sock").exists())?;
    wait("the Node registered", || node(&api).is_some())?;
    // The warm-up pod: the first start pays for cold caches.
    start_pod(&api, &signals, "warm", false)?;
    std::thread::sleep(Duration::from_secs(1));
    let rss_before = memory_mib(agent.pid(), "VmRSS")?;

    let mut plugins = Vec::new();
    let mut registered = Vec::new();
    for i in 0..samples {
        let resource = format!("example.com/b14-{i}");
        let device = devices.join(format!("r{i}"));
        char_device(&device);
        let args = PluginArgs::new(&resource, &format!("b14-{i}.sock")).device("d0", &device);
        let stderr = api.node.path(&format!("b14-{i}.log"));
        let started = Instant::now();
        plugins.push(PluginProcess::start(&plugin_dir, &args, &stderr));
        let on_node = || node(&api).is_some_and(|n| n["status"]["allocatable"][&resource] == "1");
        poll(&format!("{resource} in the Node's allocatable"), on_node)?;
        registered.push(started.elapsed());
    }
    std::thread::sleep(Duration::from_secs(1));
    let rss_plugins = memory_mib(agent.pid(), "VmRSS")?;

    let mut serial = PluginArgs::new(SERIAL, "b14-serial.sock");
    for i in 0..samples {
        let device = devices.join(format!("serial{i}"));
        char_device(&device);
        serial = serial.device(&format!("serial{i}"), &device);
    }
    plugins.push(PluginProcess::start(&plugin_dir, &serial, &api.node.path("b14-serial.log")));
    let count = samples.to_string();
    let serial_ready = || node(&api).is_some_and(|n| n["status"]["allocatable"][SERIAL] == *count);
    poll("the serial plugin's devices in the Node's allocatable", serial_ready)?;
    std::thread::sleep(Duration::from_secs(1));
    let rss_serial = memory_mib(agent.pid(), "VmRSS")?;
    let mut plain = Vec::new();
    for i in 0..samples {
        plain.push(start_pod(&api, &signals, &format!("plain-{i}"), false)?);
    }
    std::thread::sleep(Duration::from_secs(1));
    let rss_plain = memory_mib(agent.pid(), "VmRSS")?;
    let mut with_device = Vec::new();
    for i in 0..samples {
        with_device.push(start_pod(&api, &signals, &format!("device-{i}"), true)?);
    }
    std::thread::sleep(Duration::from_secs(1));
    let rss_devices = memory_mib(agent.pid(), "VmRSS")?;
    // The pods go before the agent, so that it removes them.
    for entry in std::fs::read_dir(api.node.manifests())?.flatten() {
        std::fs::remove_file(entry.path())?;
    }
    agent.stop();
    drop(plugins);

    let kib = |mib: f64| mib * 1024.0 / samples as f64;
    let per_plugin = kib(rss_plugins - rss_before);
    // What pods with a device add beyond what as many pods without one add.
    let per_device = kib((rss_devices - rss_plain) - (rss_plain - rss_serial));
    let plain_stats = Stats::millis(&plain);
    let registered = Stats::millis(&registered);
    let registration_met = registered.p50 < 100.0;
    Ok(vec![
        Entry::new(
            "B14",
            "devices: plugin started → its resource in the Node's allocatable",
            "ms",
            registered,
        )
        .target("p50 < 100 ms", registration_met)
        .detail("plugins", samples),
        Entry::new("B14", "devices: pod start with one device", "ms", Stats::millis(&with_device))
            .against(plain_stats, 1.1, "p50 ≤ 1.1 × the same pod without a device")
            .detail("pods", samples),
        Entry::new(
            "B14",
            "devices: agent RSS per registered plugin",
            "KiB",
            Stats::of(vec![per_plugin]),
        )
        .target("reported", true)
        .detail("rss_before_mib", rss_before)
        .detail("rss_after_mib", rss_plugins),
        Entry::new(
            "B14",
            "devices: agent RSS per allocated device",
            "KiB",
            Stats::of(vec![per_device]),
        )
        .target("reported", true)
        .detail("rss_serial_plugin_mib", rss_serial)
        .detail("rss_plain_pods_mib", rss_plain)
        .detail("rss_device_pods_mib", rss_devices),
    ])
}

/// A static pod whose container announces `name`, with one serial device if `device`;
/// the time from writing its manifest to the announcement.
fn start_pod(
    api: &ApiNode,
    signals: &Signals,
    name: &str,
    device: bool,
) -> anyhow::Result<Duration> {
    let mut yaml = manifest(name, false, &signals.dir);
    if device {
        let limits =
            format!("    resources:\n      limits:\n        {SERIAL}: \"1\"\n    volumeMounts:\n");
        yaml = yaml.replacen("    volumeMounts:\n", &limits, 1);
    }
    let started = Instant::now();
    api.node.put(&format!("{name}.yaml"), &yaml);
    let running = signals.wait_for(name, TIMEOUT).with_context(|| format!("pod {name}"))?;
    Ok(running - started)
}

/// The Node as the test API server has it.
fn node(api: &ApiNode) -> Option<serde_json::Value> {
    api.server.get("nodes", None, NODE).ok()
}

/// Polls `done` every millisecond, up to [`TIMEOUT`].
fn poll(what: &str, mut done: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + TIMEOUT;
    while !done() {
        if Instant::now() > deadline {
            bail!("{what}: not within {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Waits for `done`, checked every 50 ms, up to [`TIMEOUT`].
fn wait(what: &str, mut done: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + TIMEOUT;
    while !done() {
        if Instant::now() > deadline {
            bail!("{what}: not within {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}
