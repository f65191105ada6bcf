//! Outpost's benchmarks (BENCHMARKS.md): B1 detect, B2 start, B3 restart, B4 merge, B5
//! footprint, B6 reconnect, B7 scale (merge only), B8 probes, B9 pressure, B10 burst, B11
//! config, B12 streams, B13 fleet (B2, B5 and B10 with podman beside, `outpost_tests::podman`); O2
//! restart from checkpoint (asked for by the sources issue); and L1 load on the local API
//! (asked for by the reliability issue). H5, the agent's heap profile at B5's pods, runs
//! only when named, with an agent built with its heap profiler (`cargo xtask heap`).
//!
//! Run with `cargo xtask bench [--quick] [ID…]` (the release profile; CI's check uses
//! `--profile dev`). Writes `target/bench/report.json` (under `CARGO_TARGET_DIR` when
//! set) and a table on stdout.
//! A missed target is reported (`"met": false`) and does not fail the run; an error does:
//! a wrong or missing delta, a missed edit, an IO failure.
//!
//! Arguments: `--quick` for a smaller sample of each benchmark; any other word selects the
//! benchmarks whose id starts with it (`b4`, `B7`); none selects all.

// An inline module so that the benchmarks live in `bench/` beside this crate root.
mod bench {
    pub mod b10_burst;
    pub mod b11_config;
    pub mod b12_streams;
    pub mod b13_fleet;
    pub mod b14_devices;
    pub mod b1_detect;
    pub mod b2_start;
    pub mod b3_restart;
    pub mod b4_merge;
    pub mod b5_footprint;
    pub mod b6_reconnect;
    pub mod b7_scale;
    pub mod b8_probes;
    pub mod b9_pressure;
    pub mod h5_heap;
    pub mod l1_load;
    pub mod o2_restart;
    pub mod pods;
    pub mod report;
    pub mod signal;
}

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bench::report::Entry;
use bench::{
    b1_detect, b2_start, b3_restart, b4_merge, b5_footprint, b6_reconnect, b7_scale, b8_probes,
    b9_pressure, b10_burst, b11_config, b12_streams, b13_fleet, b14_devices, h5_heap, l1_load,
    o2_restart, pods, report, signal,
};

#[derive(Debug, Clone, Default)]
struct Options {
    quick: bool,
    only: Vec<String>,
}

impl Options {
    fn from_args() -> Options {
        let mut options = Options::default();
        for arg in std::env::args().skip(1) {
            match arg.as_str() {
                "--quick" => options.quick = true,
                // `cargo bench` passes `--bench` to harness-less benchmarks.
                "--bench" => {}
                flag if flag.starts_with('-') => eprintln!("bench: ignoring unknown flag {flag}"),
                id => options.only.push(id.to_ascii_uppercase()),
            }
        }
        options
    }

    /// Whether benchmark `id` is selected: by its id (`B1` is B1, not B11), or by a
    /// prefix that ends in a letter (`B` is every B).
    fn selects(&self, id: &str) -> bool {
        let by = |o: &String| {
            id == o.as_str()
                || (id.starts_with(o.as_str()) && !o.ends_with(|c: char| c.is_ascii_digit()))
        };
        self.only.is_empty() || self.only.iter().any(by)
    }
}

type Bench = fn(&Options) -> anyhow::Result<Vec<Entry>>;

fn main() -> ExitCode {
    let options = Options::from_args();
    if cfg!(debug_assertions) {
        println!("bench: an unoptimized build: a check that the benchmarks run, not their figures");
    }
    let benches: [(&str, Bench); 16] = [
        ("B1", b1_detect::run),
        ("B2", b2_start::run),
        ("B3", b3_restart::run),
        ("B4", b4_merge::run),
        ("B5", b5_footprint::run),
        ("B6", b6_reconnect::run),
        ("B7", b7_scale::run),
        ("B8", b8_probes::run),
        ("B9", b9_pressure::run),
        ("B10", b10_burst::run),
        ("B11", b11_config::run),
        ("B12", b12_streams::run),
        ("B13", b13_fleet::run),
        ("B14", b14_devices::run),
        ("O2", o2_restart::run),
        ("L1", l1_load::run),
    ];
    // Run only when named: not benchmarks, and they need an agent built otherwise.
    let on_request: [(&str, Bench); 1] = [("H5", h5_heap::run)];
    let named = on_request.into_iter().filter(|(id, _)| options.only.iter().any(|o| o == id));
    let mut entries = Vec::new();
    let mut failed = Vec::new();
    for (id, bench) in benches.into_iter().filter(|(id, _)| options.selects(id)).chain(named) {
        eprintln!("bench: running {id}{}", if options.quick { " (quick)" } else { "" });
        // Flush dirty pages first: writeback of a build that just finished (as in CI)
        // would otherwise compete with the filesystem benchmarks for the same disk.
        let _ = std::process::Command::new("sync").status();
        let started = std::time::Instant::now();
        let result = bench(&options);
        eprintln!("bench: {id} took {:.1} s", started.elapsed().as_secs_f64());
        match result {
            Ok(done) => {
                for entry in &done {
                    if let Some(error) = &entry.error {
                        eprintln!("bench: {id} failed: {}: {error}", entry.name);
                        if !failed.contains(&id) {
                            failed.push(id);
                        }
                    }
                }
                entries.extend(done);
            }
            Err(error) => {
                eprintln!("bench: {id} failed: {error:#}");
                failed.push(id);
            }
        }
    }
    b3_restart::compare_with_b2(&mut entries);
    print!("{}", report::table(&entries));
    let path = report_path();
    match report::write(&path, &entries) {
        Ok(()) => println!("report: {}", path.display()),
        Err(error) => {
            eprintln!("bench: {error:#}");
            return ExitCode::FAILURE;
        }
    }
    let missed: Vec<_> = entries.iter().filter(|e| !e.met).map(|e| e.name.as_str()).collect();
    if !missed.is_empty() {
        println!("targets missed (reported, not an error): {}", missed.join("; "));
    }
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("bench: failed: {}", failed.join(", "));
        ExitCode::FAILURE
    }
}

/// The type of the filesystem holding `path` (`ext4`, `tmpfs`...), from `/proc/mounts`.
fn fs_type(path: &Path) -> String {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (_, at, kind) = (fields.next()?, fields.next()?, fields.next()?);
            // Mount points escape spaces as \040; they are rare enough to ignore here.
            path.starts_with(at).then(|| (at.len(), kind.to_owned()))
        })
        .max_by_key(|(len, _)| *len)
        .map_or_else(|| "unknown fs".to_owned(), |(_, kind)| kind)
}

/// `<target dir>/bench/report.json`.
fn report_path() -> PathBuf {
    target_dir().join("bench").join("report.json")
}

/// cargo's target directory: `CARGO_TARGET_DIR` when set (relative to the workspace
/// root, as cargo reads it), else `<workspace>/target`.
pub fn target_dir() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    std::env::var_os("CARGO_TARGET_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| workspace.join("target"), |d| workspace.join(d))
}
