//! B7 scale, merge only (no containers).
//!
//! - start: 1,000 manifests present in a fresh directory → the time from
//!   [`FileSource::new`] until its first SET has been applied to a [`PodStore`] and
//!   returned 1,000 ADD deltas. Several samples, each on a new directory.
//! - edits: 100 edits/s to random files among the 1,000 (60 s, `--quick` 10 s). A writer
//!   task paced by a tokio interval alternates in-place writes and rename-overs, each
//!   giving the file new content (so the pod a new UID); a reader task applies the
//!   source's SETs. Two edits of one file between two reads legitimately give one SET, so
//!   an edit may never show up as its own ADD (*superseded*). It is *missed* when the
//!   reader provably read the file while it held that content (see [`Ledger::missed`]),
//!   when older content is merged after newer, and, after the writer stops, when a file's
//!   pod does not have the UID of the bytes last written to it (computed by decoding the
//!   same bytes for the same path). One miss fails the run. The latency (write → SET
//!   applied) is reported for the edits seen on their own.
//!
//! A multi-thread runtime (2 workers) runs both, so the writer is not held up by the reader.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use k8s_openapi::jiff::Timestamp;
use outpost::source::file::watch::Preference;
use outpost::source::file::{Config, FileSource};
use outpost_core::merge::{DeltaOp, PodStore};
use outpost_core::pod::{self, Source};

use crate::pods::{self, NODE};
use crate::report::{Entry, Stats};
use crate::{Options, fs_type};

const FILES: usize = 1000;
const EDITS_PER_S: u64 = 100;
/// After the writer stops, how long the files may take to be all merged.
const SETTLE: Duration = Duration::from_secs(10);
const HANG: Duration = Duration::from_secs(30);
const TARGET_START_MS: f64 = 200.0;

pub fn run(options: &Options) -> anyhow::Result<Vec<Entry>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start a tokio runtime")?;
    let (start_samples, duration) = if options.quick { (3, 10) } else { (10, 60) };
    let fs = fs_type(&std::env::temp_dir());
    let (backend, start) = runtime.block_on(start_up(start_samples)).context("B7 start")?;
    let edits = runtime.block_on(edits(Duration::from_secs(duration))).context("B7 edits")?;
    let start_entry = Entry::new(
        "B7",
        format!("scale: 1,000 manifests at start → merged ({backend}, {fs})"),
        "ms",
        Stats::millis(&start),
    )
    .p99_below(TARGET_START_MS, "p99 < 200 ms");
    let missed = edits.missed.len();
    let mut edit_entry = Entry::new(
        "B7",
        format!(
            "scale: {EDITS_PER_S} edits/s for {duration} s over 1,000 files, edit → merged ({fs})"
        ),
        "us",
        Stats::micros(&edits.latencies),
    )
    .target("zero missed edits", missed == 0)
    .detail("edits", edits.written)
    .detail("seen_individually", edits.latencies.len())
    .detail("superseded", edits.superseded)
    .detail("missed", missed)
    .detail("files_final_uid_ok", edits.final_ok)
    .detail("sets_applied", edits.sets)
    .detail("achieved_edits_per_s", (edits.written as f64 / edits.elapsed.as_secs_f64()).round());
    let parts = [
        ("in_place", &edits.in_place),
        ("rename_over", &edits.renamed),
        ("phase_source", &edits.source),
        ("phase_apply", &edits.apply),
    ];
    for (part, durations) in parts {
        let s = Stats::micros(durations);
        edit_entry = edit_entry
            .detail(&format!("{part}_p50_us"), s.p50.round())
            .detail(&format!("{part}_p99_us"), s.p99.round());
    }
    if missed > 0 {
        let first: Vec<String> = edits.missed.iter().take(10).cloned().collect();
        edit_entry =
            edit_entry.detail("first_misses", first).error(format!("{missed} edits missed"));
    }
    Ok(vec![start_entry, edit_entry])
}

fn file_name(i: usize) -> String {
    format!("node-svc-{i:04}")
}

fn write_manifests(dir: &Path) -> anyhow::Result<()> {
    fs::create_dir(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for i in 0..FILES {
        let name = file_name(i);
        fs::write(dir.join(format!("{name}.yaml")), pods::manifest(&name, 0))?;
    }
    Ok(())
}

async fn start_up(samples: usize) -> anyhow::Result<(String, Vec<Duration>)> {
    let mut times = Vec::with_capacity(samples);
    let mut backend = String::new();
    for _ in 0..samples {
        let root = tempfile::tempdir()?;
        let dir = root.path().join("manifests");
        write_manifests(&dir)?;
        let start = Instant::now();
        let mut source = FileSource::new(Config {
            path: dir.clone(),
            node_name: NODE.to_owned(),
            watcher: Preference::Auto,
        })?;
        let first = tokio::time::timeout(HANG, source.next()).await.context("no first SET")??;
        let mut store = PodStore::new([Source::File]);
        let merged = store.apply(first, Timestamp::now());
        let elapsed = start.elapsed();
        let adds = merged.deltas.iter().filter(|d| d.op == DeltaOp::Add).count();
        ensure!(
            adds == FILES && merged.deltas.len() == FILES,
            "the first SET merged into {} deltas ({adds} ADD), not {FILES} ADD",
            merged.deltas.len()
        );
        times.push(elapsed);
        backend = source.backend().to_string();
    }
    Ok((backend, times))
}

/// One edit, as the writer records it.
#[derive(Debug, Clone)]
struct Edit {
    file: usize,
    revision: u64,
    /// Just before the write (the start of its detect latency).
    written: Instant,
    /// When the write (or the rename) had returned: its kernel event is queued by then.
    done: Option<Instant>,
    /// Renamed over the file (else written in place).
    renamed: bool,
    /// When the source returned, and the reader had applied, the SET in which this
    /// content first appeared as an ADD.
    seen: Option<(Instant, Instant)>,
}

#[derive(Debug, Default)]
struct Ledger {
    /// UID of each edit's content → the edit.
    by_uid: HashMap<String, Edit>,
    /// Per file, the UIDs of its contents in writing order (the initial content first).
    history: Vec<Vec<String>>,
    /// Per file, the latest revision the reader has seen.
    last_seen: Vec<u64>,
    /// When the reader finished applying each SET, in order.
    applied: Vec<Instant>,
    /// How long each `apply` took.
    apply_durations: Vec<Duration>,
    /// ADDs of content older than content already seen for the same file.
    stale: Vec<String>,
}

impl Ledger {
    /// Whether an edit that never showed up on its own was missed rather than coalesced
    /// with the next edit of its file (written at `next`).
    ///
    /// The reader reads the kernel's events for SET j only after it applied SET j-1. If
    /// SET j-1 was applied after the edit's write returned (its event was queued), the
    /// source handled that event, and so read the file, before returning SET j. If SET j
    /// was applied before the next edit began, that read saw this edit's content, and the
    /// content is a new UID, so SET j had to ADD it.
    fn missed(&self, edit: &Edit, next: Instant) -> bool {
        let Some(done) = edit.done else { return false };
        let j = self.applied.partition_point(|t| *t <= done);
        self.applied.get(j + 1).is_some_and(|t| *t < next)
    }
}

#[derive(Debug)]
struct Outcome {
    written: usize,
    latencies: Vec<Duration>,
    /// Latencies split: written → SET returned by the source, by kind of write.
    source: Vec<Duration>,
    in_place: Vec<Duration>,
    renamed: Vec<Duration>,
    apply: Vec<Duration>,
    superseded: usize,
    missed: Vec<String>,
    final_ok: usize,
    sets: usize,
    elapsed: Duration,
}

async fn edits(duration: Duration) -> anyhow::Result<Outcome> {
    let root = tempfile::tempdir()?;
    let dir = root.path().join("manifests");
    write_manifests(&dir)?;
    let mut ledger = Ledger { last_seen: vec![0; FILES], ..Ledger::default() };
    for i in 0..FILES {
        let path = dir.join(format!("{}.yaml", file_name(i)));
        let uid = pods::uid(pods::manifest(&file_name(i), 0).as_bytes(), &path)?;
        ledger.history.push(vec![uid]);
    }
    let ledger = Arc::new(Mutex::new(ledger));
    let mut source = FileSource::new(Config {
        path: dir.clone(),
        node_name: NODE.to_owned(),
        watcher: Preference::Auto,
    })?;
    let mut store = PodStore::new([Source::File]);
    let first = tokio::time::timeout(HANG, source.next()).await.context("no first SET")??;
    ensure!(
        store.apply(first, Timestamp::now()).deltas.len() == FILES,
        "the first SET is not 1,000 pods"
    );

    let (done_tx, done_rx) = tokio::sync::watch::channel(false);
    let reader = tokio::spawn(read(source, store, Arc::clone(&ledger), done_rx));
    let started = Instant::now();
    let written = tokio::spawn(write(dir.clone(), Arc::clone(&ledger), duration))
        .await
        .context("the writer task panicked")??;
    let elapsed = started.elapsed();
    let _ = done_tx.send(true);
    let (store, sets) = reader.await.context("the reader task panicked")??;

    let ledger = Arc::try_unwrap(ledger)
        .map_err(|_| anyhow::anyhow!("the ledger is still shared"))?
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    let mut missed: Vec<String> = ledger.stale.clone();

    // The final state: every file's pod has the UID of the file's last content.
    let have: HashMap<String, String> = store
        .pods()
        .map(|(_, _, p)| (p.metadata.name.clone().unwrap_or_default(), pod::uid(p).to_owned()))
        .collect();
    ensure!(have.len() == FILES, "{} pods in the store, not {FILES}", have.len());
    let mut final_ok = 0;
    for (i, history) in ledger.history.iter().enumerate() {
        let name = format!("{}-{NODE}", file_name(i));
        let want = history.last().map(String::as_str);
        if have.get(&name).map(String::as_str) == want {
            final_ok += 1;
        } else {
            missed.push(format!("{name}: final UID {:?}, last written {want:?}", have.get(&name)));
        }
    }

    // Every edit but the last of each file (the final state covers those): seen on its
    // own, or coalesced with the next edit, or missed.
    let mut latencies = Vec::new();
    let (mut source, mut in_place, mut renamed) = (Vec::new(), Vec::new(), Vec::new());
    let mut superseded = 0;
    for history in &ledger.history {
        let edits: Vec<&Edit> =
            history.iter().skip(1).filter_map(|u| ledger.by_uid.get(u)).collect();
        for (k, edit) in edits.iter().enumerate() {
            if let Some((returned, applied)) = edit.seen {
                let latency = applied.duration_since(edit.written);
                latencies.push(latency);
                source.push(returned.duration_since(edit.written));
                if edit.renamed { &mut renamed } else { &mut in_place }.push(latency);
                continue;
            }
            let Some(next) = edits.get(k + 1) else {
                continue;
            };
            if ledger.missed(edit, next.written) {
                missed.push(format!(
                    "{} revision {} was never merged, though two SETs were applied before revision {} was written",
                    file_name(edit.file),
                    edit.revision,
                    next.revision
                ));
            } else {
                superseded += 1;
            }
        }
    }
    Ok(Outcome {
        written,
        latencies,
        source,
        in_place,
        renamed,
        apply: ledger.apply_durations,
        superseded,
        missed,
        final_ok,
        sets,
        elapsed,
    })
}

/// The writer: an edit every 10 ms to a random file, alternating in-place writes and
/// rename-overs. Returns the number of edits written.
async fn write(
    dir: PathBuf,
    ledger: Arc<Mutex<Ledger>>,
    duration: Duration,
) -> anyhow::Result<usize> {
    let mut interval = tokio::time::interval(Duration::from_micros(1_000_000 / EDITS_PER_S));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut random = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut revisions = vec![0u64; FILES];
    let end = Instant::now() + duration;
    let mut written = 0;
    loop {
        interval.tick().await;
        if Instant::now() >= end {
            return Ok(written);
        }
        let file = (random.next() % FILES as u64) as usize;
        revisions[file] += 1;
        let revision = revisions[file];
        let name = file_name(file);
        let path = dir.join(format!("{name}.yaml"));
        let bytes = pods::manifest(&name, revision).into_bytes();
        let uid = pods::uid(&bytes, &path)?;
        let renamed = written % 2 == 1;
        {
            let mut ledger = ledger.lock().unwrap_or_else(PoisonError::into_inner);
            let edit =
                Edit { file, revision, written: Instant::now(), done: None, renamed, seen: None };
            ledger.by_uid.insert(uid.clone(), edit);
            ledger.history[file].push(uid.clone());
        }
        if renamed {
            let temp = dir.join(format!(".{name}.yaml.tmp"));
            fs::write(&temp, &bytes)?;
            fs::rename(&temp, &path)?;
        } else {
            fs::write(&path, &bytes)?;
        }
        let done = Instant::now();
        if let Some(edit) =
            ledger.lock().unwrap_or_else(PoisonError::into_inner).by_uid.get_mut(&uid)
        {
            edit.done = Some(done);
        }
        written += 1;
    }
}

/// The reader: applies SETs and marks each edit whose content shows up as an ADD. After
/// the writer is done, reads until the source has been quiet for 500 ms.
async fn read(
    mut source: FileSource,
    mut store: PodStore,
    ledger: Arc<Mutex<Ledger>>,
    done: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<(PodStore, usize)> {
    let mut sets = 0;
    let mut settle_until: Option<Instant> = None;
    loop {
        if settle_until.is_none() && *done.borrow() {
            settle_until = Some(Instant::now() + SETTLE);
        }
        let wait = match settle_until {
            Some(until) => {
                Duration::from_millis(500).min(until.saturating_duration_since(Instant::now()))
            }
            None => Duration::from_millis(200),
        };
        // `next` may be cancelled: the watcher's reads are cancel-safe and everything
        // read is handled before the next await.
        let update = match tokio::time::timeout(wait, source.next()).await {
            Ok(update) => update?,
            Err(_) if settle_until.is_some() => return Ok((store, sets)),
            Err(_) => continue,
        };
        let returned = Instant::now();
        let merged = store.apply(update, Timestamp::now());
        let now = Instant::now();
        sets += 1;
        let mut ledger = ledger.lock().unwrap_or_else(PoisonError::into_inner);
        ledger.applied.push(now);
        ledger.apply_durations.push(now - returned);
        for delta in merged.deltas.iter().filter(|d| d.op == DeltaOp::Add) {
            let uid = pod::uid(&delta.pod);
            let Some(edit) = ledger.by_uid.get_mut(uid) else {
                bail!("an ADD of UID {uid} that no edit wrote");
            };
            edit.seen.get_or_insert((returned, now));
            let (file, revision) = (edit.file, edit.revision);
            if revision < ledger.last_seen[file] {
                let latest = ledger.last_seen[file];
                ledger.stale.push(format!(
                    "{} revision {revision} merged after revision {latest}",
                    file_name(file)
                ));
            }
            ledger.last_seen[file] = ledger.last_seen[file].max(revision);
        }
    }
}

/// A small deterministic PRNG (xorshift64*), so runs edit the same files.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}
