//! Probes what the integration tests need from the machine (root, the test containerd,
//! the Debian tools `cargo xtask deps` installs, BPF) and sets one `outpost_has_*` cfg per
//! prerequisite that is there (the list, with what each takes, is `prerequisites.rs`). A
//! test whose prerequisite is missing carries `#[needs(name)]` (the `tests/needs` macro:
//! `#[cfg_attr(not(outpost_has_name), ignore = "why")]`), so a local `cargo test` reports
//! it as ignored, with the reason, instead of as passed. Under `CI=true` every cfg is set:
//! every test runs, and one whose prerequisite is missing fails (`prerequisite()` panics).
//! `cargo test -- --include-ignored` runs them all as well.
//!
//! The probe reruns when an environment variable it reads changes, or when a Debian
//! package is installed or removed (`/var/lib/dpkg/status`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Each prerequisite's name (its cfg is `outpost_has_<name>`) and what it takes.
const PREREQUISITES: &[(&str, &str)] = include!("prerequisites.rs");

/// The socket of the test containerd (also read by `outpost_tests::containerd`).
const SOCKET_ENV: &str = "OUTPOST_TEST_CONTAINERD_SOCKET";

fn main() {
    for var in ["CI", SOCKET_ENV, "PATH", "USER"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=prerequisites.rs");
    let dpkg = Path::new("/var/lib/dpkg/status");
    if dpkg.exists() {
        println!("cargo::rerun-if-changed={}", dpkg.display());
    }
    for (name, _) in PREREQUISITES {
        println!("cargo::rustc-check-cfg=cfg(outpost_has_{name})");
    }
    let in_ci = std::env::var("CI").is_ok_and(|v| v == "true");
    for (name, _) in PREREQUISITES {
        if in_ci || probe(name) {
            println!("cargo::rustc-cfg=outpost_has_{name}");
        }
    }
}

fn probe(name: &str) -> bool {
    let root = is_root();
    let containerd = root && std::env::var_os(SOCKET_ENV).is_some_and(|s| !s.is_empty());
    let plugins = Path::new("/usr/lib/cni/bridge").is_file();
    match name {
        "root" => root,
        "containerd" => containerd,
        "pods" => containerd && plugins,
        "cni" => {
            root && plugins && ["nsenter", "ip", "iptables", "busybox"].iter().all(|t| on_path(t))
        }
        "runc" => root && on_path("runc") && Path::new("/bin/busybox").is_file(),
        "crun" => containerd && plugins && on_path("crun"),
        "containerd_binary" => root && on_path("containerd"),
        "registry" => ["/usr/bin/docker-registry", "/usr/bin/skopeo", "/usr/bin/htpasswd"]
            .iter()
            .all(|tool| Path::new(tool).is_file()),
        "seccomp" => python_has("seccomp"),
        "prometheus" => Path::new("/usr/bin/prometheus").is_file(),
        "python_websockets" => python_has("websockets"),
        "python_grpc" => python_has("grpc") && python_has("grpc_tools"),
        "systemd_analyze" => on_path("systemd-analyze"),
        "systemd_creds" => on_path("systemd-creds"),
        "faketime" => ["x86_64", "aarch64"].iter().any(|arch| {
            Path::new(&format!("/usr/lib/{arch}-linux-gnu/faketime/libfaketimeMT.so.1")).is_file()
        }),
        "bpf" => root && Path::new("/sys/kernel/btf/vmlinux").is_file(),
        "dnsmasq" => root && Path::new("/usr/sbin/dnsmasq").is_file() && on_path("ip"),
        "dbus" => on_path("dbus-daemon"),
        "swap" => {
            let swap_off = std::fs::read_to_string("/proc/swaps")
                .is_ok_and(|swaps| swaps.trim().lines().count() <= 1);
            root && swap_off && ["mkswap", "swapon", "swapoff"].iter().all(|t| on_path(t))
        }
        "node_exporter" => Path::new("/usr/bin/prometheus-node-exporter").is_file(),
        "podman" => root && on_path("podman"),
        "kubectl" => kubectl_versions(),
        _ => false,
    }
}

/// Whether kubectl 1.27 and 1.33 are beside the real file of the `kubectl` on PATH.
fn kubectl_versions() -> bool {
    let Some(kubectl) = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path).map(|d| d.join("kubectl")).find(|p| p.is_file())
    }) else {
        return false;
    };
    let Some(dir) =
        std::fs::canonicalize(kubectl).ok().and_then(|real| real.parent().map(Path::to_path_buf))
    else {
        return false;
    };
    ["kubectl.1.27", "kubectl.1.33"].iter().all(|name| dir.join(name).is_file())
}

/// Whether Debian's python3 (not a pyenv one on PATH) imports `module`.
fn python_has(module: &str) -> bool {
    Command::new("/usr/bin/python3")
        .args(["-c", &format!("import {module}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether the effective user is root (the build runs as the user who runs the tests).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .is_some_and(|l| l.split_whitespace().nth(2) == Some("0"))
    })
}

/// Whether `tool` is an executable file in a directory of `$PATH`.
fn on_path(tool: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|dir: PathBuf| dir.join(tool)).any(|candidate| {
        std::fs::metadata(candidate)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}
