//! J1: what `outpost join` writes (discovery is tested end to end, tests/integration/join.rs).

use std::os::unix::fs::PermissionsExt as _;

use outpost_core::bootstrap_token::Pin;

use super::files::{Layout, bootstrap_kubeconfig, edit_config};
use super::*;

fn settings() -> Vec<(&'static str, String)> {
    vec![
        ("bootstrapKubeconfig", "/etc/outpost/bootstrap-kubelet.conf".into()),
        ("kubeconfig", "/etc/outpost/kubelet.conf".into()),
    ]
}

#[test]
fn j1_config_lines_are_replaced_in_place() {
    let config = "# c\nmanifestDir: /m\nkubeconfig: /old\nstateDir: /s\n";
    assert_eq!(
        edit_config(config, &settings()),
        "# c\nmanifestDir: /m\nkubeconfig: \"/etc/outpost/kubelet.conf\"\nstateDir: /s\n\
         bootstrapKubeconfig: \"/etc/outpost/bootstrap-kubelet.conf\"\n"
    );
}

#[test]
fn j1_config_values_go_below_their_commented_examples() {
    let config =
        "# The API server.\n# kubeconfig: /etc/outpost/kubeconfig\n\nlisten: 127.0.0.1:10250";
    assert_eq!(
        edit_config(config, &settings()),
        "# The API server.\n# kubeconfig: /etc/outpost/kubeconfig\n\
         kubeconfig: \"/etc/outpost/kubelet.conf\"\n\nlisten: 127.0.0.1:10250\n\
         bootstrapKubeconfig: \"/etc/outpost/bootstrap-kubelet.conf\"\n"
    );
}

#[test]
fn j1_config_edit_leaves_nested_and_longer_keys() {
    // `kubeconfigX:` and an indented `kubeconfig:` are not the key.
    let config = "kubeconfigX: 1\nnested:\n  kubeconfig: 2\n";
    let edited = edit_config(config, &[("kubeconfig", "/k".into())]);
    assert_eq!(edited, "kubeconfigX: 1\nnested:\n  kubeconfig: 2\nkubeconfig: \"/k\"\n");
    // Edited twice, the same.
    assert_eq!(edit_config(&edited, &[("kubeconfig", "/k".into())]), edited);
}

#[test]
fn j1_config_edit_quotes_values() {
    let edited = edit_config("", &[("nodeName", "edge: 1 # x".into())]);
    assert_eq!(edited, "nodeName: \"edge: 1 # x\"\n");
    let parsed: serde_json::Value = serde_saphyr::from_str(&edited).unwrap();
    assert_eq!(parsed["nodeName"], "edge: 1 # x");
}

/// The installed default config, edited: still a config the agent reads, with the keys.
#[test]
fn j1_the_installed_config_stays_valid() {
    let default = include_str!("../../../../deploy/outpost.yaml");
    let edited = edit_config(
        default,
        &[("kubeconfig", "/etc/outpost/kubelet.conf".into()), ("nodeName", "edge-1".into())],
    );
    let parsed: crate::config::Settings = serde_saphyr::from_str(&edited).unwrap();
    assert_eq!(
        parsed.kubeconfig.as_deref(),
        Some(std::path::Path::new("/etc/outpost/kubelet.conf"))
    );
    assert_eq!(parsed.node_name.as_deref(), Some("edge-1"));
    assert_eq!(
        parsed.manifest_dir.as_deref(),
        Some(std::path::Path::new("/etc/outpost/manifests"))
    );
}

fn info() -> Discovered {
    Discovered {
        server: "https://10.0.0.1:6443".into(),
        ca_pem: b"-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n".to_vec(),
        pin: Pin::of_spki(b"x"),
    }
}

#[test]
fn j1_bootstrap_kubeconfig_has_server_ca_and_token() {
    let token = "abcdef.0123456789abcdef".parse().unwrap();
    let text = bootstrap_kubeconfig(&info(), &token);
    let config = kube::config::Kubeconfig::from_yaml(&text).unwrap();
    let cluster = config.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(cluster.server.as_deref(), Some("https://10.0.0.1:6443"));
    let ca = cluster.certificate_authority_data.as_deref().unwrap();
    assert_eq!(
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, ca).unwrap(),
        info().ca_pem
    );
    assert_eq!(config.auth_infos[0].name, "tls-bootstrap-token-user");
    let raw: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(raw["users"][0]["user"]["token"], "abcdef.0123456789abcdef");
    assert_eq!(config.current_context.as_deref(), Some("tls-bootstrap-token-user@kubernetes"));
}

#[test]
fn j1_join_writes_private_files_and_keeps_the_config_mode() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("etc/outpost.yaml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "stateDir: /s\n").unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o640)).unwrap();
    let layout = Layout::new(&config, None);
    layout.check_not_joined().unwrap();
    let token = "abcdef.0123456789abcdef".parse().unwrap();
    let written = layout.write(&info(), &token, Some("edge-1")).unwrap();
    let bootstrap = dir.path().join("etc").join(BOOTSTRAP_KUBECONFIG);
    assert_eq!(written, [bootstrap.clone(), config.clone()]);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&bootstrap), 0o600);
    assert_eq!(mode(&config), 0o640);
    let text = std::fs::read_to_string(&config).unwrap();
    let kubeconfig = dir.path().join("etc").join(KUBECONFIG);
    assert_eq!(
        text,
        format!(
            "stateDir: /s\nbootstrapKubeconfig: \"{}\"\nkubeconfig: \"{}\"\nnodeName: \"edge-1\"\n",
            bootstrap.display(),
            kubeconfig.display()
        )
    );
    // Once TLS bootstrapping wrote the kubeconfig, the node has joined.
    std::fs::write(&kubeconfig, "").unwrap();
    assert!(matches!(layout.check_not_joined(), Err(Error::Joined(path)) if path == kubeconfig));
}

#[test]
fn j1_server_is_an_https_url_or_host_and_port() {
    let url = |s: &str| super::discovery::cluster_info_url(s).map(|u| u.to_string());
    let path = "/api/v1/namespaces/kube-public/configmaps/cluster-info";
    assert_eq!(url("https://10.0.0.1:6443").unwrap(), format!("https://10.0.0.1:6443{path}"));
    assert_eq!(url("10.0.0.1:6443").unwrap(), format!("https://10.0.0.1:6443{path}"));
    assert_eq!(
        url("https://api.example:6443/x?y=1").unwrap(),
        format!("https://api.example:6443{path}")
    );
    let Err(Error::Server { reason, .. }) = url("http://10.0.0.1:6443") else { panic!() };
    assert!(reason.contains("TLS"), "{reason}");
    assert!(matches!(url("https://"), Err(Error::Server { .. })));
}

/// `outpost join`'s arguments as clap parses them.
fn join_args(args: &[&str]) -> Result<JoinArgs, clap::Error> {
    use clap::Parser as _;
    let pin = format!("sha256:{}", "ab".repeat(32));
    let mut argv = vec!["outpost", "join", "--server", "https://10.0.0.1:6443"];
    argv.extend(["--discovery-token-ca-cert-hash", &pin]);
    argv.extend(args);
    match crate::cli::Cli::try_parse_from(argv)?.command {
        crate::cli::Command::Join(join) => Ok(join),
        other => panic!("not a join: {other:?}"),
    }
}

#[test]
fn j1_the_token_comes_from_the_flag_or_an_owner_only_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "abcdef.0123456789abcdef\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let path = file.to_str().unwrap();

    let from_flag = join_args(&["--token", "abcdef.0123456789abcdef"]).unwrap();
    assert_eq!(token(&from_flag).unwrap().id(), "abcdef");
    let from_file = join_args(&["--token-file", path]).unwrap();
    assert_eq!(token(&from_file).unwrap().id(), "abcdef");

    // Neither, or both: clap says so before anything is read.
    assert!(join_args(&[]).is_err());
    assert!(join_args(&["--token", "abcdef.0123456789abcdef", "--token-file", path]).is_err());

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let error = token(&from_file).unwrap_err().to_string();
    assert!(
        error.contains("may be read by others (mode 644)") && error.contains("chmod 600"),
        "{error}"
    );

    std::fs::write(&file, "not a token").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let error = token(&from_file).unwrap_err().to_string();
    assert!(
        error.starts_with(&format!("the bootstrap token file {path} does not hold")),
        "{error}"
    );

    let missing = join_args(&["--token-file", "/nonexistent/token"]).unwrap();
    let error = token(&missing).unwrap_err().to_string();
    assert_eq!(error, "cannot read the bootstrap token file /nonexistent/token");
}
