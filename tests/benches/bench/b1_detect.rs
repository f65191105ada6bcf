//! B1 detect: a manifest written → the merged delta emitted.
//!
//! The real [`FileSource`] on a temporary directory (with [`Preference::Auto`]: fanotify
//! as root) feeds a [`PodStore`] on one tokio `current_thread` runtime. Each operation
//! is timed from just before the filesystem call until `apply` has returned the expected
//! deltas. The operations cycle, file after file: create, modify (write in place),
//! rename-over (a temporary dotfile renamed over the manifest), delete. A few resident
//! manifests make the SET more than one pod.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use k8s_openapi::jiff::Timestamp;
use outpost::source::file::watch::Preference;
use outpost::source::file::{Config, FileSource};
use outpost_core::merge::{DeltaOp, PodDelta, PodStore};
use outpost_core::pod::{self, Source};

use crate::pods::{self, NODE};
use crate::report::{Entry, Stats};
use crate::{Options, fs_type};

/// Manifests present throughout.
const RESIDENT: usize = 10;
/// Only a hang takes this long; it is an error, not a slow sample.
const HANG: Duration = Duration::from_secs(10);
/// The target (BENCHMARKS.md, raised in issue 53): p99 < 0.3 ms.
const TARGET_US: f64 = 300.0;

pub fn run(options: &Options) -> anyhow::Result<Vec<Entry>> {
    let operations = if options.quick { 200 } else { 1000 };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start a tokio runtime")?;
    // The temporary directory (where a node's manifest directory would be: the root
    // filesystem, usually), then tmpfs to show the agent's share without the disk's.
    let temp = std::env::temp_dir();
    let mut places = vec![(fs_type(&temp), temp)];
    let shm = PathBuf::from("/dev/shm");
    if fs_type(&shm) == "tmpfs" && places[0].0 != "tmpfs" {
        places.push(("tmpfs".to_owned(), shm));
    }
    let mut entries = Vec::new();
    for (fs, base) in places {
        let run = runtime
            .block_on(detect(operations, &base))
            .with_context(|| format!("on {fs} ({})", base.display()))?;
        entries.push(entry(operations, &fs, run));
    }
    Ok(entries)
}

fn entry(operations: usize, fs: &str, run: Run) -> Entry {
    let Run { backend, samples, phases } = run;
    let all: Vec<Duration> = samples.iter().flatten().copied().collect();
    let mut entry = Entry::new(
        "B1",
        format!("detect: manifest written → merged delta ({backend}, {fs}, tokio current_thread)"),
        "us",
        Stats::micros(&all),
    )
    .p99_below(TARGET_US, "p99 < 0.3 ms")
    .detail("operations", operations)
    .detail("resident_manifests", RESIDENT);
    // Per kind of operation and per phase, to see what dominates.
    let parts = KINDS.iter().zip(&samples).map(|(kind, d)| (*kind, d)).chain([
        ("phase_filesystem", &phases.filesystem),
        ("phase_source", &phases.source),
        ("phase_apply", &phases.apply),
        ("decode_alone", &phases.decode),
    ]);
    for (part, durations) in parts {
        let s = Stats::micros(durations);
        entry = entry
            .detail(&format!("{part}_p50_us"), round(s.p50))
            .detail(&format!("{part}_p99_us"), round(s.p99));
    }
    entry.detail("sets_without_delta", phases.extra_sets)
}

const KINDS: [&str; 4] = ["create", "modify", "rename_over", "delete"];

fn round(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

/// What `apply` must return for an operation to count as detected.
#[derive(Debug)]
enum Expect {
    Add(String),
    Replace { old: String, new: String },
    Remove(String),
}

impl Expect {
    fn matches(&self, deltas: &[PodDelta]) -> bool {
        let ops: Vec<(DeltaOp, &str)> = deltas.iter().map(|d| (d.op, pod::uid(&d.pod))).collect();
        match self {
            Expect::Add(uid) => ops == [(DeltaOp::Add, uid.as_str())],
            Expect::Replace { old, new } => {
                ops == [(DeltaOp::Remove, old.as_str()), (DeltaOp::Add, new.as_str())]
            }
            Expect::Remove(uid) => ops == [(DeltaOp::Remove, uid.as_str())],
        }
    }
}

/// Where the time of each operation went.
#[derive(Debug, Default)]
struct Phases {
    /// The filesystem call(s) themselves.
    filesystem: Vec<Duration>,
    /// From the call's return until the source returned the SET that merged into the
    /// expected deltas (kernel event delivery, wakeup, file read and decode).
    source: Vec<Duration>,
    /// The merge's `apply` of that SET.
    apply: Vec<Duration>,
    /// `manifest::decode` of the same bytes alone (a part of `source`).
    decode: Vec<Duration>,
    /// SETs that merged into no delta on the way (should be 0).
    extra_sets: usize,
}

#[derive(Debug)]
struct Run {
    backend: String,
    /// Latencies of each kind of operation, in [`KINDS`] order.
    samples: [Vec<Duration>; 4],
    phases: Phases,
}

async fn detect(operations: usize, base: &Path) -> anyhow::Result<Run> {
    let root = tempfile::tempdir_in(base).context("cannot create a temporary directory")?;
    let dir = root.path().join("manifests");
    fs::create_dir(&dir)?;
    for i in 0..RESIDENT {
        let name = format!("resident-{i:02}");
        fs::write(dir.join(format!("{name}.yaml")), pods::manifest(&name, 0))?;
    }
    let mut source = FileSource::new(Config {
        path: dir.clone(),
        node_name: NODE.to_owned(),
        watcher: Preference::Auto,
    })?;
    let backend = source.backend().to_string();
    let mut store = PodStore::new([Source::File]);
    let first = tokio::time::timeout(HANG, source.next()).await.context("no initial SET")??;
    let merged = store.apply(first, Timestamp::now());
    ensure!(
        merged.deltas.len() == RESIDENT,
        "the initial SET gave {} deltas, not {RESIDENT}",
        merged.deltas.len()
    );

    let mut samples: [Vec<Duration>; 4] = Default::default();
    let mut phases = Phases::default();
    let mut current: Option<String> = None;
    for i in 0..operations {
        let kind = i % 4;
        let name = format!("pod-{:04}", i / 4);
        let path = dir.join(format!("{name}.yaml"));
        let temp = dir.join(format!(".{name}.yaml.tmp"));
        // Everything but the filesystem calls happens before they start.
        let bytes = pods::manifest(&name, kind as u64).into_bytes();
        let decoding = Instant::now();
        let uid = pods::uid(&bytes, &path)?;
        if kind != 3 {
            phases.decode.push(decoding.elapsed());
        }
        let expect = match (kind, current.take()) {
            (0, None) => Expect::Add(uid),
            (1 | 2, Some(old)) => Expect::Replace { old, new: uid },
            (3, Some(old)) => Expect::Remove(old),
            (kind, current) => bail!("bench bug: {} with pod {current:?}", KINDS[kind]),
        };
        let start = Instant::now();
        match kind {
            0 | 1 => fs::write(&path, &bytes)?,
            2 => {
                fs::write(&temp, &bytes)?;
                fs::rename(&temp, &path)?;
            }
            _ => fs::remove_file(&path)?,
        }
        let written = Instant::now();
        let (sets, applying) = wait_for(&mut source, &mut store, &expect)
            .await
            .with_context(|| format!("operation {i} ({} of {})", KINDS[kind], path.display()))?;
        let end = Instant::now();
        // "Written" is when the writer's last syscall returned; the syscalls themselves
        // are the writer's cost and are published apart (phase_filesystem).
        samples[kind].push(end - written);
        phases.filesystem.push(written - start);
        phases.source.push(applying - written);
        phases.apply.push(end - applying);
        phases.extra_sets += sets - 1;
        current = match expect {
            Expect::Add(new) | Expect::Replace { new, .. } => Some(new),
            Expect::Remove(_) => None,
        };
    }
    ensure!(store.len() == RESIDENT, "{} pods left, not the {RESIDENT} resident ones", store.len());
    Ok(Run { backend, samples, phases })
}

/// Reads SETs until one merges into the expected deltas; returns how many SETs that took
/// and when the last one was handed to `apply`. A SET that merges into nothing is allowed
/// (the source may report a change the merge sees as none); any other delta is an error.
async fn wait_for(
    source: &mut FileSource,
    store: &mut PodStore,
    expect: &Expect,
) -> anyhow::Result<(usize, Instant)> {
    let mut sets = 0;
    loop {
        let update = tokio::time::timeout(HANG, source.next())
            .await
            .with_context(|| format!("no SET within {HANG:?}: the change was not detected"))??;
        sets += 1;
        let applying = Instant::now();
        let merged = store.apply(update, Timestamp::now());
        if expect.matches(&merged.deltas) {
            return Ok((sets, applying));
        }
        if !merged.deltas.is_empty() {
            let got: Vec<_> =
                merged.deltas.iter().map(|d| (d.op, pod::uid(&d.pod).to_owned())).collect();
            bail!("expected {expect:?}, the merge returned {got:?}");
        }
    }
}
