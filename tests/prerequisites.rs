// The integration tests' prerequisites, one line each: the `outpost_has_<name>` cfg that
// `build.rs` sets when it is there, and what it takes, which is the reason a test needing
// it is ignored without it (`#[needs(name)]`, tests/needs). Included by both.
&[
    ("root", "root"),
    ("containerd", "root and the test containerd (cargo xtask containerd start; set OUTPOST_TEST_CONTAINERD_SOCKET)"),
    ("pods", "root, the test containerd and the CNI plugins (cargo xtask containerd start; set OUTPOST_TEST_CONTAINERD_SOCKET)"),
    ("cni", "root, the CNI plugins, nsenter, ip, iptables and busybox (cargo xtask deps)"),
    ("runc", "root, runc and busybox-static (cargo xtask deps)"),
    ("crun", "root, the test containerd, the CNI plugins and crun (cargo xtask containerd start; cargo xtask deps)"),
    ("containerd_binary", "root and a containerd binary on PATH (cargo xtask deps)"),
    ("registry", "docker-registry, skopeo and htpasswd (cargo xtask deps)"),
    ("seccomp", "python3 with the seccomp module (python3-seccomp)"),
    ("python_websockets", "python3 with the websockets module (python3-websockets)"),
    ("python_grpc", "python3 with the grpc and grpc_tools modules (python3-grpcio and python3-grpc-tools: cargo xtask deps)"),
    ("systemd_analyze", "systemd-analyze"),
    ("systemd_creds", "systemd-creds (the systemd package: cargo xtask deps)"),
    ("faketime", "Debian's libfaketime (the faketime package: cargo xtask deps)"),
    ("bpf", "root and the kernel's BTF (/sys/kernel/btf/vmlinux)"),
    ("kubectl", "kubectl on PATH with kubectl.1.27 and kubectl.1.33 beside its real file (this machine's image)"),
    ("prometheus", "Prometheus (/usr/bin/prometheus, the Debian package: cargo xtask deps)"),
    ("dnsmasq", "root, dnsmasq and ip (dnsmasq-base and iproute2: cargo xtask deps)"),
    ("swap", "root, mkswap, swapon and swapoff on PATH (util-linux, mount), and the machine's own swap off (the test turns a swap file on)"),
    ("node_exporter", "Debian's prometheus-node-exporter, packed into a test image (cargo xtask deps; cargo xtask images)"),
    ("dbus", "dbus-daemon, a private bus for the stand-in systemd-logind (the dbus package: cargo xtask deps)"),
    ("podman", "root and podman (Debian's podman 4.3: cargo xtask deps)"),
]
