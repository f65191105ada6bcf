//! Support for Outpost's integration and end-to-end tests.

use std::path::PathBuf;

/// True when running in CI (`CI=true`): missing prerequisites fail instead of skipping.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Whether this process runs as root (fanotify, later containerd and BPF need it).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .is_some_and(|l| l.split_whitespace().nth(2) == Some("0"))
    })
}

/// Returns false (the test should return early) when a prerequisite is missing outside
/// CI; panics in CI, where every prerequisite must be there.
pub fn prerequisite(ok: bool, what: &str) -> bool {
    if ok {
        return true;
    }
    assert!(
        !in_ci(),
        "CI=true and {what} is missing: CI must provide it"
    );
    eprintln!("skipping: {what} is missing (this would fail in CI)");
    false
}

/// The `outpost` binary built next to this test binary (`cargo build -p outpost`).
pub fn outpost_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    // target/<profile>/deps/integration-<hash> → target/<profile>/outpost
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join("outpost"))
        .unwrap_or_default();
    assert!(
        bin.is_file(),
        "{} not found: run `cargo build -p outpost` first (.ci/run does)",
        bin.display()
    );
    bin
}

/// A pod manifest with one container.
pub fn pod_yaml(name: &str, image: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  containers:\n  - name: main\n    image: {image}\n"
    )
}
