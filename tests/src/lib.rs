//! Support for Outpost's integration and end-to-end tests.

pub mod agent;
pub mod api_pods;
pub mod apiserver;
pub mod cluster;
pub mod containerd;
pub mod device_plugin;
pub mod faketime;
pub mod fleet;
pub mod kubectl;
pub mod logind;
pub mod manifest_server;
pub mod pod_resources;
pub mod podman;
pub mod pods;
pub mod propagation;
pub mod registry;
pub mod relay;
pub mod smaps;
pub mod swap;
pub mod workload;

/// `#[needs(pods)]`: a test ignored, with the reason, where a prerequisite is missing.
pub use outpost_tests_needs::needs;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// True when running in CI (`CI=true`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Whether this process runs as root (fanotify, containerd and BPF need it).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .is_some_and(|l| l.split_whitespace().nth(2) == Some("0"))
    })
}

/// Fails the test when a prerequisite is missing. A test that needs something the
/// machine may lack is ignored (with the reason) where `tests/build.rs` found it missing;
/// one that runs anyway (`CI=true`, `--include-ignored`, or a probe that was too hopeful)
/// fails here, saying what is missing, and never passes without having run.
#[track_caller]
pub fn prerequisite(ok: bool, what: &str) {
    if !ok {
        missing(what);
    }
}

/// Fails the test: `what` is missing (see [`prerequisite`]).
#[track_caller]
pub fn missing(what: &str) -> ! {
    let ci = if in_ci() { " (CI=true: CI must provide it)" } else { "" };
    panic!("{what} is missing{ci}")
}

/// `outpost` run through `support/without-fanotify`, which blocks `fanotify_init` with
/// seccomp (as a container's default profile does), so the agent falls back to inotify.
/// Needs python3-seccomp (tests using it carry `outpost_has_seccomp`).
pub fn without_fanotify() -> std::process::Command {
    let has_seccomp = std::process::Command::new("/usr/bin/python3")
        .args(["-c", "import seccomp"])
        .status()
        .is_ok_and(|s| s.success());
    prerequisite(has_seccomp, "python3-seccomp (cargo xtask deps installs it)");
    let launcher = Path::new(env!("CARGO_MANIFEST_DIR")).join("support/without-fanotify");
    let mut command = std::process::Command::new(launcher);
    command.arg(outpost_bin());
    command
}

/// `outpost` run through `support/as-hardened` with the systemd drop-in `dropin` (its
/// `[Service]` settings): the capability bounding set, no_new_privs and libseccomp's
/// rendering of its seccomp settings, as systemd would start the agent. Needs
/// python3-seccomp (tests using it carry `outpost_has_seccomp`).
pub fn as_hardened(dropin: &Path) -> std::process::Command {
    let launcher = Path::new(env!("CARGO_MANIFEST_DIR")).join("support/as-hardened");
    let mut command = std::process::Command::new(launcher);
    command.arg(dropin).arg(outpost_bin());
    command
}

/// Writes a secret (a token, a private key) the way the agent accepts it: mode 600.
pub fn write_private(path: &Path, contents: impl AsRef<[u8]>) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, contents)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .unwrap_or_else(|e| panic!("cannot chmod 600 {}: {e}", path.display()));
}

/// Names an `outpost` binary built together with the program that runs it (`cargo xtask
/// bench` builds the benchmarks and the agent in one cargo invocation), which is then run
/// as it is rather than built again.
pub const BIN_ENV: &str = "OUTPOST_TEST_BIN";

/// The `outpost` binary, built (once per test process, with `outpost-container-log` beside
/// it) next to this test binary with the same cargo, target directory and profile, so the
/// tests never run a stale agent; or the one `$OUTPOST_TEST_BIN` names.
pub fn outpost_bin() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| match std::env::var_os(BIN_ENV).filter(|b| !b.is_empty()) {
            Some(bin) => {
                let bin = PathBuf::from(bin);
                assert!(bin.is_file(), "{BIN_ENV}={} is not a file", bin.display());
                bin
            }
            None => build_outpost(),
        })
        .clone()
}

fn build_outpost() -> PathBuf {
    cargo_build(&[("outpost", "outpost"), ("outpost-container-log", "outpost-container-log")])
}

/// Builds `(package, binary)`s next to this test binary with the same cargo, target
/// directory and profile; the first one's path.
fn cargo_build(binaries: &[(&str, &str)]) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    // target/<profile>/deps/integration-<hash> → target/<profile>/outpost
    let profile_dir =
        exe.parent().and_then(Path::parent).map(Path::to_path_buf).unwrap_or_default();
    let target_dir = profile_dir.parent().map(Path::to_path_buf).unwrap_or_default();
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev",
        Some(other) => other,
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    // What `cargo test` set for this package (`CARGO_PKG_NAME=outpost-tests`...): a build
    // script that watches one (ring's) would be stale here and in the next build from a
    // shell, and everything after it rebuilt both times. (xtask's cargo drops the same.)
    const SET_BY_CARGO: [&str; 6] = [
        "CARGO_PKG_",
        "CARGO_MANIFEST_",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "OUT_DIR",
    ];
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(|n| SET_BY_CARGO.iter().any(|p| n.starts_with(p))) {
            command.env_remove(&name);
        }
    }
    command.args(["build", "--quiet"]);
    for (package, bin) in binaries {
        command.args(["--package", package, "--bin", bin]);
    }
    let status = command
        .args(["--profile", profile])
        .env("CARGO_TARGET_DIR", &target_dir)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .status();
    let names: Vec<&str> = binaries.iter().map(|(_, bin)| *bin).collect();
    assert!(status.as_ref().is_ok_and(|s| s.success()), "cannot build {names:?}: {status:?}");
    let bin = profile_dir.join(names.first().copied().unwrap_or_default());
    assert!(bin.is_file(), "{} was not built", bin.display());
    bin
}

/// The small container logger beside [`outpost_bin`], which the agent's shims run.
pub fn container_log_bin() -> PathBuf {
    let bin = outpost_bin().with_file_name("outpost-container-log");
    assert!(bin.is_file(), "{} is not a file (built beside the agent)", bin.display());
    bin
}

/// A pod manifest with one container.
pub fn pod_yaml(name: &str, image: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  containers:\n  - name: main\n    image: {image}\n"
    )
}
