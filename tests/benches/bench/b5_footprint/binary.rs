//! The arm64 distribution binary's size, read from the size ledger that `cargo xtask size`
//! writes (`docs/src/reference/size.md`): a fat-LTO cross build takes longer than the
//! rest of B5, so the benchmark does not build it. CI's `cargo xtask size --check` keeps
//! the ledger of the sources it checks out (it measures again when the ledger is stale).

use std::path::{Path, PathBuf};

use crate::bench::report::{Entry, Stats};

const TARGET_MIB: f64 = 18.0;
const NAME: &str = "footprint: arm64 distribution binary (outpost)";
/// The ledger's line with the measured size: `<!-- xtask size: bytes=N inputs=HASH -->`.
const MARKER: &str = "<!-- xtask size: ";

/// The ledger, in the repository the benchmark is built from.
fn ledger() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/reference/size.md")
}

/// The entry for the arm64 binary; `agent` is the `outpost` the benchmark runs, whose
/// size is recorded beside it.
pub fn size_entry(agent: &Path) -> Entry {
    let this_agent = std::fs::metadata(agent).map(|m| m.len()).unwrap_or_default();
    let path = ledger();
    let recorded = std::fs::read_to_string(&path).ok().and_then(|page| recorded(&page));
    let Some((bytes, inputs)) = recorded else {
        return Entry::new("B5", NAME, "MiB", Stats::of(vec![]))
            .detail("this_agent_bytes", this_agent)
            .target(
                &format!("≤ 18 MiB: no size in {} (run `cargo xtask size`)", path.display()),
                false,
            );
    };
    Entry::new("B5", NAME, "MiB", Stats::of(vec![bytes as f64 / (1024.0 * 1024.0)]))
        .detail("bytes", bytes)
        .detail("read_from", path.display().to_string())
        .detail("inputs_sha256", inputs)
        .detail("this_agent_bytes", this_agent)
        .p99_below(TARGET_MIB, "≤ 18 MiB (the ledger's, `cargo xtask size`)")
}

/// The size and the inputs' hash the ledger records.
fn recorded(page: &str) -> Option<(u64, String)> {
    let line = page.lines().find_map(|line| line.strip_prefix(MARKER))?;
    let mut bytes = None;
    let mut inputs = None;
    for field in line.trim_end_matches("-->").split_whitespace() {
        match field.split_once('=') {
            Some(("bytes", value)) => bytes = value.parse().ok(),
            Some(("inputs", value)) => inputs = Some(value.to_owned()),
            _ => {}
        }
    }
    Some((bytes?, inputs?))
}
