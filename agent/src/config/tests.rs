use std::io::Write;
use std::time::Duration;

use super::api::Tls;
use super::*;
use std::net::IpAddr;

fn file(yaml: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(yaml.as_bytes()).unwrap();
    f
}

/// `outpost run`'s flags `args` as the command line gives them to [`Settings`].
pub(super) fn parse_flags(args: &[&str]) -> Settings {
    #[derive(clap::Parser)]
    struct Run {
        #[command(flatten)]
        settings: Settings,
    }
    let args = std::iter::once("run").chain(args.iter().copied());
    <Run as clap::Parser>::try_parse_from(args).unwrap().settings
}

fn flags(path: &Path) -> Settings {
    Settings { config: Some(path.into()), node_name: Some("Edge-1".into()), ..Settings::default() }
}

#[test]
fn defaults_follow_the_design() {
    let c =
        Config::resolve(Settings { node_name: Some("n".into()), ..Settings::default() }).unwrap();
    assert_eq!(c.sources.manifest_dir, Path::new(DEFAULT_MANIFEST_DIR));
    assert_eq!(c.node.state_dir, Path::new(DEFAULT_STATE_DIR));
    assert_eq!(c.containerd.mode, Mode::Auto);
    assert_eq!(c.containerd.socket, Path::new(DEFAULT_CONTAINERD_SOCKET));
    assert_eq!(c.api.listen.to_string(), "127.0.0.1:10250");
    assert_eq!(c.api.listen, DEFAULT_LISTEN);
    assert_eq!(c.sources.watcher, Preference::Auto);
}

#[test]
fn node_name_is_lowercased_like_kubelet() {
    let f = file("");
    assert_eq!(Config::resolve(flags(f.path())).unwrap().node.name, "edge-1");
}

#[test]
fn kubelet_configuration_aliases_are_accepted() {
    let f = file(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
         staticPodPath: /srv/pods\nstaticPodURL: http://127.0.0.1:9/pods\n\
         staticPodURLHeader:\n  Authorization: [\"Bearer x\"]\naddress: 0.0.0.0\nport: 10255\n",
    );
    let c = Config::resolve(flags(f.path())).unwrap();
    assert_eq!(c.sources.manifest_dir, Path::new("/srv/pods"));
    assert_eq!(c.sources.manifest_url.as_deref(), Some("http://127.0.0.1:9/pods"));
    assert_eq!(
        c.sources.manifest_url_headers,
        vec![("Authorization".to_owned(), "Bearer x".to_owned())]
    );
    assert_eq!(c.api.listen.to_string(), "0.0.0.0:10255");
}

#[test]
fn outpost_names_in_the_file_and_flags_over_the_file() {
    let f = file(
        "manifestDir: /a\nstateDir: /s\nlisten: 127.0.0.1:1234\ncontainerd: managed\n\
         manifestUrlHeader: [\"X-Token: t\"]\nwatcher: inotify\nimagesDir: /i\n",
    );
    let c = Config::resolve(flags(f.path())).unwrap();
    assert_eq!(c.sources.manifest_dir, Path::new("/a"));
    assert_eq!(c.containerd.mode, Mode::Managed);
    assert_eq!(c.sources.watcher, Preference::Inotify);
    assert_eq!(c.sources.manifest_url_headers, vec![("X-Token".to_owned(), "t".to_owned())]);
    let mut fl = flags(f.path());
    fl.manifest_dir = Some("/b".into());
    fl.listen = Some("127.0.0.1:99".parse().unwrap());
    let c = Config::resolve(fl).unwrap();
    assert_eq!(c.sources.manifest_dir, Path::new("/b"));
    assert_eq!(c.api.listen.port(), 99);
    assert_eq!(c.node.state_dir, Path::new("/s"));
}

#[test]
fn mistakes_in_the_file_are_named() {
    let f = file("manifestDri: /a\n");
    let err = Config::resolve(flags(f.path())).unwrap_err().to_string();
    assert!(err.contains("manifestDri"), "{err}");
    let f = file("watcher: polling\n");
    let err = Config::resolve(flags(f.path())).unwrap_err().to_string();
    assert!(err.contains("watcher") && err.contains("polling"), "{err}");
    let err = Config::resolve(Settings {
        config: Some("/nonexistent/outpost.yaml".into()),
        ..Settings::default()
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("/nonexistent/outpost.yaml"), "{err}");
}

#[test]
fn yaml_mistakes_name_the_line_and_column() {
    let f = file("stateDir: /s\nmanifestDri: /a\n");
    let err = Config::resolve(flags(f.path())).unwrap_err().to_string();
    let place = format!("config file {}:2:1: unknown field `manifestDri`", f.path().display());
    assert!(err.starts_with(&place) && !err.contains("at line"), "{err}");
    // A key given twice is refused (not the last one kept); only true and false are
    // booleans.
    for (yaml, mistake) in [
        ("nodeLabels:\n  zone: a\n  zone: b\n", "3:3: duplicate mapping key `zone`"),
        ("ebpf: yes\n", "1:7: invalid boolean"),
    ] {
        let f = file(yaml);
        let err = Config::resolve(flags(f.path())).unwrap_err().to_string();
        assert!(err.contains(&format!("{}:{mistake}", f.path().display())), "{yaml}: {err}");
    }
    assert!(Settings::from_yaml("ebpf: true\n---\nebpf: false\n").is_err(), "one document");
    let comments = file("# nothing set here\n");
    assert!(Config::resolve(flags(comments.path())).unwrap().ebpf);
}

#[test]
fn url_headers_must_have_a_name() {
    assert!(parse_header("Authorization: Bearer x").is_ok());
    assert!(parse_header("no colon").is_err());
    assert!(parse_header(": v").is_err());
}

#[test]
fn url_interval_accepts_kubelet_durations() {
    let f = file("httpCheckFrequency: 1m30s\n");
    assert_eq!(
        Config::resolve(flags(f.path())).unwrap().sources.manifest_url_interval,
        Duration::from_secs(90)
    );
    let c = Config::resolve(Settings {
        manifest_url_interval: Some("250ms".into()),
        ..flags(f.path())
    });
    assert_eq!(c.unwrap().sources.manifest_url_interval, Duration::from_millis(250), "flags win");
    let d =
        Config::resolve(Settings { node_name: Some("n".into()), ..Settings::default() }).unwrap();
    assert_eq!(d.sources.manifest_url_interval, DEFAULT_MANIFEST_URL_INTERVAL);
    for bad in ["0s", "-5s", "soon", ""] {
        let err = Config::resolve(Settings {
            manifest_url_interval: Some(bad.into()),
            ..flags(f.path())
        });
        assert!(matches!(err, Err(Error::Duration { .. })), "{bad:?}: {err:?}");
    }
}

#[test]
fn tls_needs_a_certificate_and_a_key_and_client_cas_need_tls() {
    let f = file(
        "tlsCertFile: /etc/outpost/tls.crt\ntlsPrivateKeyFile: /etc/outpost/tls.key\ntokenFile: /etc/outpost/token\n",
    );
    let auth = Config::resolve(flags(f.path())).unwrap().api.auth;
    assert_eq!(
        auth.tls,
        Some(Tls {
            cert_file: "/etc/outpost/tls.crt".into(),
            key_file: "/etc/outpost/tls.key".into()
        })
    );
    assert_eq!(auth.token_file.as_deref(), Some(Path::new("/etc/outpost/token")));

    let half = file("tlsCertFile: /etc/outpost/tls.crt\n");
    let err = Config::resolve(flags(half.path())).unwrap_err();
    assert!(err.to_string().contains("tls-private-key-file"), "{err}");
    let ca_only = file("clientCaFile: /etc/outpost/ca.crt\n");
    let err = Config::resolve(flags(ca_only.path())).unwrap_err();
    assert!(err.to_string().contains("client-ca-file"), "{err}");
}

#[test]
fn containerd_mode_and_socket_from_file_and_flags() {
    let f = file("containerd: external\ncontainerdSocket: /run/k3s/containerd.sock\n");
    let c = Config::resolve(flags(f.path())).unwrap();
    assert_eq!(c.containerd.mode, Mode::External);
    assert_eq!(c.containerd.socket, Path::new("/run/k3s/containerd.sock"));
    let mut fl = flags(f.path());
    fl.containerd = Some(Mode::Auto);
    assert_eq!(Config::resolve(fl).unwrap().containerd.mode, Mode::Auto);
    let f = file("containerd: docker\n");
    let err = Config::resolve(flags(f.path())).unwrap_err().to_string();
    assert!(err.contains("containerd") && err.contains("auto, managed or external"), "{err}");
}

#[test]
fn node_labels_and_taints_from_flags_like_kubelet() {
    let labels = parse_labels(&["a=1,b=2".into(), "example.com/zone = north".into()]).unwrap();
    assert_eq!(labels.len(), 3);
    assert_eq!(labels["example.com/zone"], "north");
    assert_eq!(parse_labels(&["a=".into()]).unwrap()["a"], "");
    assert!(parse_labels(&["novalue".into()]).unwrap_err().to_string().contains("novalue"));
    assert!(parse_labels(&["=x".into()]).is_err());

    let taints = parse_taints(&["dedicated=edge:NoSchedule,maintenance:NoExecute".into()]).unwrap();
    assert_eq!(taints.len(), 2);
    assert_eq!(
        (taints[0].key.as_str(), taints[0].value.as_deref(), taints[0].effect.as_str()),
        ("dedicated", Some("edge"), "NoSchedule")
    );
    assert_eq!((taints[1].key.as_str(), taints[1].value.as_deref()), ("maintenance", None));
    for bad in ["dedicated=edge", "x:Sometimes", ":NoSchedule"] {
        let err = parse_taints(&[bad.into()]).unwrap_err().to_string();
        assert!(err.contains(bad), "{err}");
    }
}

#[test]
fn node_registration_fields_from_the_file_flags_win() {
    let f = file(
        "nodeLabels:\n  zone: north\nregisterWithTaints:\n- key: edge\n  effect: NoSchedule\nstopPodsOnShutdown: true\n",
    );
    let c = Config::resolve(flags(f.path())).unwrap();
    assert_eq!(c.node.labels["zone"], "north");
    assert_eq!(c.node.taints[0].key, "edge");
    assert!(c.shutdown.stop_pods);
    let mut fl = flags(f.path());
    fl.node_labels = vec!["zone=south".parse().unwrap()];
    fl.register_with_taints = vec!["other:NoExecute".parse().unwrap()];
    let c = Config::resolve(fl).unwrap();
    assert_eq!(c.node.labels["zone"], "south");
    assert_eq!(c.node.taints[0].key, "other");
    let defaults = Config::resolve(Settings { node_name: Some("n".into()), ..Settings::default() });
    assert!(!defaults.unwrap().shutdown.stop_pods, "pods keep running by default");
}

/// K5: kubelet's check of `--node-labels` at start, from the flags and from the file.
#[test]
fn k5_node_labels_a_node_may_not_set_stop_the_agent_with_kubelet_s_message() {
    let mut fl = Settings { node_name: Some("n".into()), ..Settings::default() };
    fl.node_labels = vec!["node-role.kubernetes.io/edge=,site=a".parse().unwrap()];
    let err = Config::resolve(fl).unwrap_err().to_string();
    assert!(
        err.starts_with(
            "failed to validate node labels: unknown 'kubernetes.io' or 'k8s.io' labels \
             specified with --node-labels: [node-role.kubernetes.io/edge]"
        ),
        "{err}"
    );
    let f = file("nodeLabels:\n  node-restriction.kubernetes.io/site: a\n");
    let err = Config::resolve(flags(f.path())).unwrap_err().to_string();
    assert!(err.contains("[node-restriction.kubernetes.io/site]"), "{err}");
    let f = file("nodeLabels:\n  node.kubernetes.io/gateway: \"true\"\n  example.com/site: a\n");
    assert_eq!(Config::resolve(flags(f.path())).unwrap().node.labels.len(), 2);
}

#[test]
fn ebpf_is_on_unless_the_flag_or_the_file_says_false() {
    let c =
        Config::resolve(Settings { node_name: Some("n".into()), ..Settings::default() }).unwrap();
    assert!(c.ebpf);
    let f = file("ebpf: false\n");
    assert!(!Config::resolve(flags(f.path())).unwrap().ebpf);
    let mut fl = flags(f.path());
    fl.ebpf = Some(true);
    assert!(Config::resolve(fl).unwrap().ebpf, "the flag wins");
}

/// deploy/outpost.yaml is a real config: it parses as it ships, and with every commented
/// field line uncommented (so each documented field exists under that name).
#[test]
fn the_example_config_documents_real_fields() {
    let example = include_str!("../../../deploy/outpost.yaml");
    let shipped = file(example);
    Config::resolve(flags(shipped.path())).unwrap();
    // A commented field ("# name: value"), and the lines of a commented block under a
    // field with no value (list items, nested keys).
    let mut in_block = false;
    let mut uncommented = String::new();
    for line in example.lines() {
        let rest = line.strip_prefix("# ").unwrap_or("");
        let field = rest.split_once(':').filter(|(k, _)| {
            k.starts_with(|c: char| c.is_ascii_lowercase())
                && k.chars().all(|c| c.is_ascii_alphanumeric())
        });
        let take = if let Some((_, value)) = field {
            in_block = value.trim().is_empty();
            true
        } else {
            in_block &= rest.starts_with("- ") || rest.starts_with("  ");
            in_block
        };
        uncommented.push_str(if take { rest } else { line });
        uncommented.push('\n');
    }
    let all = file(&uncommented);
    Config::resolve(flags(all.path())).unwrap_or_else(|e| panic!("{e}\n{uncommented}"));
}

#[test]
fn the_seccomp_profile_root_is_under_the_state_dir_unless_given() {
    let settings = |state_dir: &str, root: Option<&str>| Settings {
        node_name: Some("n".into()),
        state_dir: Some(state_dir.into()),
        seccomp_profile_root: root.map(Into::into),
        ..Settings::default()
    };
    let c = Config::resolve(settings("/srv/outpost", None)).unwrap();
    assert_eq!(c.pods.seccomp_profile_root, Path::new("/srv/outpost/seccomp"));
    let c = Config::resolve(settings("/srv/outpost", Some("/etc/seccomp"))).unwrap();
    assert_eq!(c.pods.seccomp_profile_root, Path::new("/etc/seccomp"));
    let f = file("seccompProfileRoot: /opt/profiles\n");
    assert_eq!(
        Config::resolve(flags(f.path())).unwrap().pods.seccomp_profile_root,
        Path::new("/opt/profiles")
    );
}

/// D3: the CDI spec directories are containerd's defaults unless given, in the order
/// given.
#[test]
fn d3_cdi_spec_dirs_are_etc_cdi_and_var_run_cdi_unless_given() {
    let c =
        Config::resolve(Settings { node_name: Some("n".into()), ..Settings::default() }).unwrap();
    assert_eq!(c.pods.cdi_spec_dirs, [Path::new("/etc/cdi"), Path::new("/var/run/cdi")]);
    let f = file("cdiSpecDirs: [/opt/cdi, /run/cdi]\n");
    assert_eq!(
        Config::resolve(flags(f.path())).unwrap().pods.cdi_spec_dirs,
        [Path::new("/opt/cdi"), Path::new("/run/cdi")]
    );
    let settings = parse_flags(&["--cdi-spec-dir", "/b", "--cdi-spec-dir", "/a"]);
    assert_eq!(settings.cdi_spec_dir, [Path::new("/b"), Path::new("/a")]);
}

#[test]
fn allowed_unsafe_sysctls_from_the_file_or_flags_namespaced_only() {
    let f = file("allowedUnsafeSysctls:\n- net.core.somaxconn\n- kernel.msg*\n");
    let c = Config::resolve(flags(f.path())).unwrap();
    assert_eq!(c.pods.allowed_unsafe_sysctls, ["net.core.somaxconn", "kernel.msg*"]);
    let settings = parse_flags(&["--allowed-unsafe-sysctls", "net.core.*,fs.mqueue.msg_max"]);
    assert_eq!(settings.allowed_unsafe_sysctls, ["net.core.*", "fs.mqueue.msg_max"]);

    let f = file("allowedUnsafeSysctls: [vm.swappiness]\n");
    let err = Config::resolve(flags(f.path())).unwrap_err().to_string();
    assert!(err.contains("\"vm.swappiness\" is not known to be namespaced"), "{err}");
    let defaults = Config::resolve(Settings { node_name: Some("n".into()), ..Settings::default() });
    assert!(defaults.unwrap().pods.allowed_unsafe_sysctls.is_empty());
}

#[test]
fn the_admission_policy_is_read_from_the_file_over_the_defaults() {
    use outpost_core::admission::{Policy, SourcePolicy};
    let defaults =
        Config::resolve(Settings { node_name: Some("n".into()), ..Settings::default() }).unwrap();
    assert_eq!(defaults.pods.admission_policy, Policy::default());

    let f = file(
        "admissionPolicy:\n  push:\n    privileged: true\n    hostPID: true\n    allowedHostPaths: [/var/log/, /srv//data/./x/..]\n  file:\n    hostNetwork: false\n",
    );
    let policy = Config::resolve(flags(f.path())).unwrap().pods.admission_policy;
    assert_eq!(
        policy.push,
        SourcePolicy {
            privileged: true,
            host_pid: true,
            allowed_host_paths: vec!["/var/log".into(), "/srv/data".into()],
            ..SourcePolicy::restricted()
        }
    );
    assert_eq!(policy.file, SourcePolicy { host_network: false, ..SourcePolicy::unrestricted() });
    assert_eq!(policy.url, SourcePolicy::restricted());
    assert_eq!(policy.api, SourcePolicy::unrestricted());

    let f = file("admissionPolicy:\n  url:\n    allowedHostPaths: [var/log]\n");
    let err = Config::resolve(flags(f.path())).unwrap_err().to_string();
    assert!(
        err.contains("admissionPolicy.url.allowedHostPaths: \"var/log\" is not an absolute path"),
        "{err}"
    );
    for unknown in ["admissionPolicy:\n  http: {}\n", "admissionPolicy:\n  push: {hostPid: true}\n"]
    {
        let f = file(unknown);
        let err = Config::resolve(flags(f.path())).unwrap_err().to_string();
        assert!(err.contains("unknown field"), "{unknown}: {err}");
    }
}

/// K2: cluster DNS from the flags (comma separated, repeatable) or KubeletConfiguration's
/// fields, with kubelet's resolvConf default and `""` for none.
#[test]
fn k2_cluster_dns_domain_and_resolv_conf_from_the_file_or_flags() {
    let f = file(
        "clusterDNS: [10.96.0.10, 'fd00::a']\nclusterDomain: corp.internal\nresolvConf: /run/systemd/resolve/resolv.conf\n",
    );
    let c = Config::resolve(flags(f.path())).unwrap();
    let ips: Vec<IpAddr> = vec!["10.96.0.10".parse().unwrap(), "fd00::a".parse().unwrap()];
    assert_eq!(c.pods.dns.cluster_dns, ips);
    assert_eq!(c.pods.dns.cluster_domain, "corp.internal");
    assert_eq!(
        c.pods.dns.resolv_conf.as_deref(),
        Some(Path::new("/run/systemd/resolve/resolv.conf"))
    );

    let settings = parse_flags(&[
        "--cluster-dns",
        "10.96.0.10,10.96.0.11",
        "--cluster-dns",
        "10.96.0.12",
        "--cluster-domain",
        "",
        "--resolv-conf",
        "",
    ]);
    let c = Config::resolve(Settings { node_name: Some("n".into()), ..settings }).unwrap();
    assert_eq!(c.pods.dns.cluster_dns.len(), 3);
    assert_eq!((c.pods.dns.cluster_domain.as_str(), c.pods.dns.resolv_conf), ("", None));

    let defaults = Config::resolve(Settings { node_name: Some("n".into()), ..Settings::default() });
    let dns = defaults.unwrap().pods.dns;
    assert!(dns.cluster_dns.is_empty());
    assert_eq!(dns.cluster_domain, "cluster.local");
    assert_eq!(dns.resolv_conf.as_deref(), Some(Path::new("/etc/resolv.conf")));
    assert!(Config::resolve(flags(file("clusterDNS: [not-an-ip]\n").path())).is_err());
}

/// K4: `--max-pods` / `maxPods`, kubelet's 110 by default; the flag wins.
#[test]
fn k4_max_pods_from_the_file_and_the_flag() {
    let defaults = Config::resolve(Settings { node_name: Some("n".into()), ..Settings::default() });
    assert_eq!(defaults.unwrap().node.max_pods, 110);
    let f = file("maxPods: 12\n");
    assert_eq!(Config::resolve(flags(f.path())).unwrap().node.max_pods, 12);
    let mut fl = flags(f.path());
    fl.max_pods = Some(3);
    assert_eq!(Config::resolve(fl).unwrap().node.max_pods, 3);
    let bad = file("maxPods: many\n");
    assert!(Config::resolve(flags(bad.path())).is_err());
}

#[test]
fn j3_shutdown_grace_periods_from_the_file_flags_win() {
    let f = file("shutdownGracePeriod: 30s\nshutdownGracePeriodCriticalPods: 10s\n");
    let groups = Config::resolve(flags(f.path())).unwrap().shutdown.groups;
    let graces: Vec<(i32, u64)> = groups.iter().map(|g| (g.priority, g.grace.as_secs())).collect();
    assert_eq!(graces, [(0, 20), (2_000_000_000, 10)]);
    let mut fl = flags(f.path());
    fl.shutdown_grace_period = Some("1m".into());
    let groups = Config::resolve(fl).unwrap().shutdown.groups;
    assert_eq!(groups[0].grace.as_secs(), 50);

    let f = file(
        "shutdownGracePeriodByPodPriority:\n- priority: 100000\n  shutdownGracePeriodSeconds: 60\n\
         - priority: 0\n  shutdownGracePeriodSeconds: 20\n",
    );
    let groups = Config::resolve(flags(f.path())).unwrap().shutdown.groups;
    let graces: Vec<(i32, u64)> = groups.iter().map(|g| (g.priority, g.grace.as_secs())).collect();
    assert_eq!(graces, [(0, 20), (100_000, 60)]);

    let off = Config::resolve(Settings { node_name: Some("n".into()), ..Settings::default() });
    assert!(off.unwrap().shutdown.groups.is_empty(), "off unless given");
    let f = file("shutdownGracePeriodByPodPriority:\n- priority: 0\n  seconds: 20\n");
    assert!(Config::resolve(flags(f.path())).is_err(), "an unknown field is refused");
}

/// J1, J2: the certificate settings, from flags and from KubeletConfiguration's keys.
#[test]
fn j1_j2_certificate_settings_resolve_and_are_checked() {
    let f = file(
        "kubeconfig: /etc/outpost/kubeconfig\nbootstrapKubeconfig: /etc/outpost/bootstrap\nserverTLSBootstrap: true\n",
    );
    let config = Config::resolve(flags(f.path())).unwrap();
    let want = Certificates {
        bootstrap_kubeconfig: Some("/etc/outpost/bootstrap".into()),
        rotate: true,
        server_tls_bootstrap: true,
    };
    assert_eq!(config.certificates, want);
    let off = parse_flags(&[
        "--node-name=n",
        "--kubeconfig=/k",
        "--bootstrap-kubeconfig=/b",
        "--rotate-certificates=false",
    ]);
    assert!(!Config::resolve(off).unwrap().certificates.rotate);
    let plain = Config::resolve(parse_flags(&["--node-name=n", "--kubeconfig=/k"])).unwrap();
    assert_eq!(plain.certificates, Certificates::default());
    for (args, needle) in [
        (
            &["--node-name=n", "--bootstrap-kubeconfig=/b"][..],
            "--bootstrap-kubeconfig needs --kubeconfig",
        ),
        (
            &["--node-name=n", "--kubeconfig=/k", "--rotate-certificates"][..],
            "rotateCertificates needs",
        ),
        (&["--node-name=n", "--server-tls-bootstrap"][..], "serverTLSBootstrap needs"),
    ] {
        let err = Config::resolve(parse_flags(args)).unwrap_err().to_string();
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// `--runtime` / `runtime:`: runc unless crun is asked for; an unknown runtime is refused
/// with the names it may be.
#[test]
fn the_oci_runtime_is_runc_unless_crun_is_set() {
    let f = file("");
    assert_eq!(Config::resolve(flags(f.path())).unwrap().pods.runtime, OciRuntime::Runc);
    let crun = Settings { node_name: Some("n".into()), ..parse_flags(&["--runtime", "crun"]) };
    assert_eq!(Config::resolve(crun).unwrap().pods.runtime, OciRuntime::Crun);
    let f = file("runtime: crun\n");
    assert_eq!(Config::resolve(flags(f.path())).unwrap().pods.runtime, OciRuntime::Crun);
    assert_eq!(OciRuntime::Crun.binary(), "crun");
    let f = file("runtime: youki\n");
    let err = Config::resolve(flags(f.path())).unwrap_err().to_string();
    assert!(err.contains("runtime: \"youki\": expected runc or crun"), "{err}");
}

/// `nodeLeaseDurationSeconds`: kubelet's 40 by default, from the file or the flag, and
/// nothing shorter than the beat's four periods.
#[test]
fn the_node_lease_duration_defaults_to_kubelets_and_refuses_less() {
    let named = || Settings { node_name: Some("n".into()), ..Settings::default() };
    assert_eq!(Config::resolve(named()).unwrap().node.lease_duration_seconds, 40);
    let f = file("nodeLeaseDurationSeconds: 120\n");
    assert_eq!(Config::resolve(flags(f.path())).unwrap().node.lease_duration_seconds, 120);
    for seconds in [0, 39, -5] {
        let short = Settings { node_lease_duration_seconds: Some(seconds), ..named() };
        let error = Config::resolve(short).unwrap_err().to_string();
        let expected = format!("node lease duration {seconds} s: give at least 40 s");
        assert!(error.starts_with(&expected), "{error}");
    }
}

#[test]
fn the_hostname_is_the_kernels_trimmed() {
    let host = crate::host::Recording::new();
    assert!(hostname(&host).is_err(), "unreadable");
    host.file("/proc/sys/kernel/hostname", "Edge-1\n");
    assert_eq!(hostname(&host).unwrap(), "Edge-1");
}

/// D6: `--fail-swap-on` is kubelet's flag, `failSwapOn` and `memorySwap.swapBehavior`
/// its file's keys; an unknown behaviour is refused in kubelet's words.
#[test]
fn d6_swap_settings_are_kubelets_flag_and_keys() {
    let c = Config::resolve(Settings { node_name: Some("n".into()), ..Settings::default() });
    let c = c.unwrap();
    assert!(c.swap.fail_swap_on, "true by default");
    assert_eq!(c.pods.swap_behavior, outpost_core::swap::Behavior::NoSwap);
    let given = parse_flags(&["--node-name", "n", "--fail-swap-on=false"]);
    assert!(!Config::resolve(given).unwrap().swap.fail_swap_on);
    let f = file("failSwapOn: false\nmemorySwap:\n  swapBehavior: LimitedSwap\n");
    let c = Config::resolve(flags(f.path())).unwrap();
    assert!(!c.swap.fail_swap_on);
    assert_eq!(c.swap.behavior, outpost_core::swap::Behavior::LimitedSwap);
    assert_eq!(c.pods.swap_behavior, outpost_core::swap::Behavior::LimitedSwap);
    let f = file("memorySwap:\n  swapBehavior: UnlimitedSwap\n");
    let error = Config::resolve(flags(f.path())).unwrap_err().to_string();
    assert!(error.contains("memorySwap.swapBehavior \"UnlimitedSwap\" must be one of"), "{error}");
    let f = file("memorySwap:\n  swapBehaviour: NoSwap\n");
    assert!(Config::resolve(flags(f.path())).is_err(), "an unknown key is refused");
}

/// D5: with one shim for the node, each runtime handler has a shim of its own; with one
/// per pod, a pod's containers (one handler) share its.
#[test]
fn d5_each_handler_has_its_own_node_shim() {
    assert_eq!(ShimGrouping::Pod.group("u1", Some("nvidia")), "u1");
    assert_eq!(ShimGrouping::Node.group("u1", None), "outpost-node");
    assert_eq!(ShimGrouping::Node.group("u1", Some("nvidia")), "outpost-node-nvidia");
}

/// D5: `--runtime-handler` flags over the file's `runtimeHandlers`, checked when the
/// configuration is resolved.
#[test]
fn d5_runtime_handlers_come_from_the_flags_or_the_file() {
    let f = file("runtimeHandlers:\n  nvidia: /usr/bin/nvidia-container-runtime\n");
    let c = Config::resolve(flags(f.path())).unwrap();
    let handlers: Vec<&String> = c.pods.runtime_handlers.keys().collect();
    assert_eq!(handlers, ["nvidia"]);
    let s = Settings {
        config: Some(f.path().into()),
        node_name: Some("n".into()),
        ..parse_flags(&["--runtime-handler", "crun=/usr/bin/crun"])
    };
    let handlers: Vec<String> =
        Config::resolve(s).unwrap().pods.runtime_handlers.into_keys().collect();
    assert_eq!(handlers, ["crun"], "the flags win");
    let f = file("runtimeHandlers:\n  runc: /usr/bin/crun\n");
    let error = Config::resolve(flags(f.path())).unwrap_err().to_string();
    assert!(error.contains("\"runc\" is the node's default handler"), "{error}");
}
