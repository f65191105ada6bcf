//! The arm64 distribution binary's size, read from what `cargo xtask dist --target
//! aarch64-unknown-linux-gnu` left in the target directory: a cross build with the
//! `distribution` profile takes longer than the rest of B5, so the benchmark does not
//! build it. CI's cheaper `ci-dist` build is read when there is no release one,
//! and the entry says which it was and how old.

use std::path::Path;
use std::time::SystemTime;

use crate::bench::report::{Entry, Stats};

const TRIPLE: &str = "aarch64-unknown-linux-gnu";
/// The profiles `dist` builds with, the shipped one first.
const PROFILES: [&str; 2] = ["distribution", "ci-dist"];
const TARGET_MIB: f64 = 20.0;
const NAME: &str = "footprint: arm64 distribution binary (outpost)";

/// The entry for the arm64 binary; `agent` is the `outpost` the benchmark runs
/// (`<target dir>/<profile>/outpost`), which says where the target directory is.
pub fn size_entry(agent: &Path) -> Entry {
    let target_dir = agent
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf()));
    let this_agent = std::fs::metadata(agent).map(|m| m.len()).unwrap_or_default();
    let found = target_dir.as_deref().and_then(|dir| {
        PROFILES.iter().find_map(|profile| {
            let path = dir.join(TRIPLE).join(profile).join("outpost");
            let meta = std::fs::metadata(&path).ok()?;
            Some((*profile, path, meta))
        })
    });
    let Some((profile, path, meta)) = found else {
        let wanted = target_dir.unwrap_or_default().join(TRIPLE).join(PROFILES[0]);
        return Entry::new("B5", NAME, "MiB", Stats::of(vec![]))
            .detail("this_agent_bytes", this_agent)
            .target(
                &format!(
                    "≤ 20 MiB: not built ({} has no outpost; run `cargo xtask dist --target {TRIPLE}`)",
                    wanted.display()
                ),
                false,
            );
    };
    let mib = meta.len() as f64 / (1024.0 * 1024.0);
    let entry = Entry::new("B5", NAME, "MiB", Stats::of(vec![mib]))
        .detail("bytes", meta.len())
        .detail("profile", profile)
        .detail("read_from", path.display().to_string())
        .detail("age_hours", age_hours(meta.modified().ok()))
        .detail("this_agent_bytes", this_agent);
    if profile == PROFILES[0] {
        entry.p99_below(TARGET_MIB, "≤ 20 MiB")
    } else {
        entry.target(
            &format!(
                "≤ 20 MiB at the distribution profile: only {profile} was built (`cargo xtask dist --target {TRIPLE}` builds it)"
            ),
            false,
        )
    }
}

/// How long ago the binary was built, in hours (one decimal).
fn age_hours(modified: Option<SystemTime>) -> f64 {
    let age = modified.and_then(|m| SystemTime::now().duration_since(m).ok()).unwrap_or_default();
    (age.as_secs_f64() / 360.0).round() / 10.0
}
