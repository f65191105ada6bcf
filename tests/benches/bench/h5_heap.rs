//! H5, the agent's heap profile at B5's pods (not a benchmark: run on request, with an
//! agent built with the `dhat-heap` feature, by `cargo xtask heap`). The agent runs
//! B5's busybox pods (100, `--quick`: 10) with `OUTPOST_DHAT_HEAP` set; once every pod
//! runs and the agent has settled, SIGTERM makes it write its dhat profile before it lets
//! go of anything (`outpost::heap_profile`). The profile's totals are reported: bytes and
//! blocks live at the end (t-end: the running agent's heap) and at the peak (t-gmax), per
//! pod, and the agent's code sites that hold the most at each, each site being the first
//! frame of the agent's own code above the allocation. The profile itself stays in
//! `target/heap/dhat-heap.json` for dhat's viewer (`dh_view.html`).
//!
//! A plain agent (the same binary, not recording) then adopts the pods; once settled, its
//! RSS is reported with where it is (`smaps`), and it removes the pods as B5's teardown
//! does. The RSS is that of the build H5 ran (`cargo xtask heap` builds the dev
//! profile): a comparison between two commits, not B5's figure.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use outpost_tests::agent::Agent;
use outpost_tests::outpost_bin;
use outpost_tests::pods::Node;
use outpost_tests::smaps::Breakdown;

use crate::Options;
use crate::bench::b5_footprint::{PREFIX, manifest, procfs, teardown, wait_running};
use crate::report::{Entry, Stats};

/// The agent's variable naming the profile's file (`outpost::heap_profile::ENV`).
const PROFILE_ENV: &str = "OUTPOST_DHAT_HEAP";
/// How many sites are listed for t-end and for t-gmax.
const TOP: usize = 12;
/// How long the agent may take to write its profile and stop.
const STOP_PATIENCE: Duration = Duration::from_secs(120);

pub fn run(options: &Options) -> anyhow::Result<Vec<Entry>> {
    let count = if options.quick { 10 } else { 100 };
    let settle = Duration::from_secs(if options.quick { 5 } else { 15 });
    let file = profile_path();
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let _ = std::fs::remove_file(&file);

    let node = Node::try_new().map_err(|what| anyhow::anyhow!("H5 needs {what}"))?;
    let mut command = Command::new(outpost_bin());
    command.env(PROFILE_ENV, &file);
    let agent = Agent::start_pods_with(command, &node.manifests(), &node.args());
    for i in 0..count {
        node.put(&format!("fp-{i:03}.yaml"), &manifest(i));
    }
    let uids = wait_running(&agent, PREFIX, count)?;
    std::thread::sleep(settle);
    // With dhat's own records of every live block: not the agent's RSS (B5 measures it).
    let rss_mib = procfs::memory_mib(agent.pid(), "VmRSS")?;
    let started = Instant::now();
    agent.stop();
    let written = (|| {
        while !file.is_file() {
            if started.elapsed() > STOP_PATIENCE {
                bail!(
                    "no heap profile at {} after SIGTERM: build the agent with the dhat-heap feature (`cargo xtask heap`)",
                    file.display()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Profile::read(&file)
    })();

    // A plain agent adopts the pods and removes them.
    let agent = node.start();
    let adopted = wait_running(&agent, PREFIX, count).map(|_| {
        std::thread::sleep(settle);
        plain_rss(&agent, count)
    });
    let torn_down = teardown(&node, agent, &uids, PREFIX);
    let profile = written?;
    let rss = adopted.context("the pods after the profiled agent stopped")??;
    torn_down.context("teardown")?;
    println!("heap profile: {}", file.display());
    let mut entries = profile.entries(count, rss_mib, &file);
    entries.push(rss);
    Ok(entries)
}

/// The plain agent's RSS with its pods, and where it is.
fn plain_rss(agent: &Agent, pods: usize) -> anyhow::Result<Entry> {
    let pid = agent.pid();
    let rss = procfs::memory_mib(pid, "VmRSS")?;
    let breakdown = Breakdown::of(pid).with_context(|| format!("cannot read /proc/{pid}/smaps"))?;
    let entry = Entry::new(
        "H5",
        format!("agent RSS without recording, {pods} adopted pods (this build)"),
        "MiB",
        Stats::of(vec![(rss * 1000.0).round() / 1000.0]),
    )
    .target("(B5 measures the release build)", true)
    .detail("anon_mib", procfs::memory_mib(pid, "RssAnon")?)
    .detail("arenas", breakdown.arenas);
    Ok(breakdown.rss_mib.iter().fold(entry, |entry, (kind, mib)| {
        entry.detail(kind.key(), (mib * 1000.0).round() / 1000.0)
    }))
}

/// `<target dir>/heap/dhat-heap.json` (the report's target directory).
fn profile_path() -> PathBuf {
    crate::target_dir().join("heap").join("dhat-heap.json")
}

/// Bytes and blocks.
#[derive(Debug, Clone, Copy, Default)]
struct Heap {
    bytes: u64,
    blocks: u64,
}

impl Heap {
    fn add(&mut self, bytes: u64, blocks: u64) {
        self.bytes += bytes;
        self.blocks += blocks;
    }
}

/// What a dhat profile (`dhatFileVersion` 2, `rust-heap` mode) says, by the agent's sites.
#[derive(Debug, Default)]
struct Profile {
    total: Heap,
    at_gmax: Heap,
    at_end: Heap,
    /// Site (the first frame of the agent's own code) → (at t-end, at t-gmax).
    sites: HashMap<String, (Heap, Heap)>,
}

impl Profile {
    fn read(file: &Path) -> anyhow::Result<Profile> {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        let json: serde_json::Value = serde_json::from_str(&text).with_context(|| {
            format!("{} is not JSON (a partly written profile?)", file.display())
        })?;
        if json["mode"] != "rust-heap" {
            bail!("{} is not a dhat heap profile (mode {})", file.display(), json["mode"]);
        }
        let frames: Vec<&str> = json["ftbl"]
            .as_array()
            .context("the profile has no frame table (ftbl)")?
            .iter()
            .map(|f| f.as_str().unwrap_or_default())
            .collect();
        let mut profile = Profile::default();
        for point in json["pps"].as_array().context("the profile has no program points (pps)")? {
            let n = |key: &str| point[key].as_u64().unwrap_or(0);
            profile.total.add(n("tb"), n("tbk"));
            profile.at_gmax.add(n("gb"), n("gbk"));
            profile.at_end.add(n("eb"), n("ebk"));
            let site = point["fs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|i| frames.get(usize::try_from(i.as_u64()?).ok()?))
                .find_map(|f| agent_frame(f))
                .unwrap_or_else(|| "(outside the agent's code)".to_owned());
            let (end, gmax) = profile.sites.entry(site).or_default();
            end.add(n("eb"), n("ebk"));
            gmax.add(n("gb"), n("gbk"));
        }
        Ok(profile)
    }

    /// The `count` sites holding the most bytes by `by` (t-end or t-gmax), as
    /// `bytes B / blocks: site`.
    fn top(&self, by: fn(&(Heap, Heap)) -> Heap) -> Vec<String> {
        let mut sites: Vec<(&String, Heap)> = self.sites.iter().map(|(s, h)| (s, by(h))).collect();
        sites.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then_with(|| a.0.cmp(b.0)));
        sites
            .into_iter()
            .take(TOP)
            .map(|(site, heap)| format!("{} B / {} blocks: {site}", heap.bytes, heap.blocks))
            .collect()
    }

    fn entries(&self, pods: usize, rss_mib: f64, file: &Path) -> Vec<Entry> {
        let kib = |bytes: u64| (bytes as f64 / 1024.0 * 10.0).round() / 10.0;
        let at_end = Entry::new(
            "H5",
            format!("heap profile: live at t-end (SIGTERM), {pods} pods"),
            "KiB",
            Stats::of(vec![kib(self.at_end.bytes)]),
        )
        .target("(a profile, no target)", true)
        .detail("blocks", self.at_end.blocks)
        .detail("per_pod_kib", kib(self.at_end.bytes / pods.max(1) as u64))
        .detail("top_sites", self.top(|(end, _)| *end))
        .detail("profile", file.display().to_string());
        let at_gmax = Entry::new(
            "H5",
            format!("heap profile: live at t-gmax (the peak), {pods} pods"),
            "KiB",
            Stats::of(vec![kib(self.at_gmax.bytes)]),
        )
        .target("(a profile, no target)", true)
        .detail("blocks", self.at_gmax.blocks)
        .detail("top_sites", self.top(|(_, gmax)| *gmax));
        let total = Entry::new(
            "H5",
            format!("heap profile: allocated in all, {pods} pods"),
            "KiB",
            Stats::of(vec![kib(self.total.bytes)]),
        )
        .target("(a profile, no target)", true)
        .detail("blocks", self.total.blocks)
        .detail("rss_mib_with_dhat", (rss_mib * 1000.0).round() / 1000.0);
        for entry in [&at_end, &at_gmax] {
            println!("{}:", entry.name);
            for site in entry.details["top_sites"].as_array().into_iter().flatten() {
                println!("  {}", site.as_str().unwrap_or_default());
            }
        }
        vec![at_end, at_gmax, total]
    }
}

/// The agent's function and place in a dhat frame (`0x…: outpost::worker::… (agent/src/…:12:5)`),
/// if the frame is the agent's own code (outpost's crates, not the profiler's).
fn agent_frame(frame: &str) -> Option<String> {
    let function = frame.split_once(": ").map_or(frame, |(_, f)| f);
    let ours = function.starts_with("outpost")
        || function.starts_with("<outpost")
        || function.contains(" as outpost");
    (ours && !function.contains("heap_profile")).then(|| function.to_owned())
}
