//! J1: `outpost join` (the real binary) against the test API server over TLS: token
//! discovery of its signed `cluster-info`, the CA pin, and the files a join writes.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::config::{KubeConfigOptions, Kubeconfig};
use outpost_core::bootstrap_token::{self as bt, Pin};
use outpost_tests::apiserver::TestApiServer;
use outpost_tests::outpost_bin;

const ID: &str = "j1abcd";
const SECRET: &str = "0123456789abcdef";

/// The pin of the server's CA, as `kubeadm token create --print-join-command` prints it.
fn ca_pin(server: &TestApiServer) -> String {
    bt::ca_pins(server.ca_pem().unwrap().as_bytes()).unwrap()[0].to_string()
}

struct Joined {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// Runs `outpost join` with the config in `dir`, the token given by `token` (`--token
/// ID.SECRET` or `--token-file FILE`).
async fn join(
    server: &TestApiServer,
    dir: &Path,
    token: [&str; 2],
    pin: &str,
    extra: &[&str],
) -> Joined {
    let mut command = std::process::Command::new(outpost_bin());
    command
        .args(["join", "--server", &server.url()])
        .args(token)
        .args(["--discovery-token-ca-cert-hash", pin, "--config"])
        .arg(dir.join("outpost.yaml"))
        .args(extra);
    let started = Instant::now();
    let out = tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap();
    Joined {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        took: started.elapsed(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn j1_join_verifies_cluster_info_and_writes_a_working_bootstrap_kubeconfig() {
    let server = TestApiServer::start_tls().await.unwrap();
    server.add_bootstrap_token(ID, SECRET).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("outpost.yaml"),
        "# kubeconfig: /etc/outpost/kubeconfig\nstateDir: /s\n",
    )
    .unwrap();

    // The token from a file, as cloud-init would leave it (owner-only, a newline).
    let token = format!("{ID}.{SECRET}");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let from_file = ["--token-file", token_file.to_str().unwrap()];
    let joined =
        join(&server, dir.path(), from_file, &ca_pin(&server), &["--node-name", "edge-1"]).await;
    assert_eq!(joined.code, Some(0), "{}{}", joined.stdout, joined.stderr);
    println!(
        "J1 join (cluster-info read, verified, read again over TLS; files written): {:.0?}",
        joined.took
    );
    assert!(joined.stdout.contains(&ca_pin(&server)), "{}", joined.stdout);

    let bootstrap = dir.path().join("bootstrap-kubelet.conf");
    let mode = std::fs::metadata(&bootstrap).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let config = std::fs::read_to_string(dir.path().join("outpost.yaml")).unwrap();
    let kubeconfig = dir.path().join("kubelet.conf");
    assert_eq!(
        config,
        format!(
            "# kubeconfig: /etc/outpost/kubeconfig\nkubeconfig: \"{}\"\nstateDir: /s\n\
             bootstrapKubeconfig: \"{}\"\nnodeName: \"edge-1\"\n",
            kubeconfig.display(),
            bootstrap.display()
        )
    );
    assert!(!kubeconfig.exists(), "TLS bootstrapping writes it, not join");

    // The bootstrap kubeconfig reaches the server over TLS verified with the CA it
    // carries, and sends the token.
    let written = Kubeconfig::read_from(&bootstrap).unwrap();
    let raw: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&bootstrap).unwrap()).unwrap();
    assert_eq!(raw["users"][0]["user"]["token"], token.as_str());
    let options = KubeConfigOptions::default();
    let config = kube::Config::from_custom_kubeconfig(written, &options).await.unwrap();
    assert_eq!(config.cluster_url.to_string().trim_end_matches('/'), server.url());
    let client = kube::Client::try_from(config).unwrap();
    let info = kube::Api::<ConfigMap>::namespaced(client, "kube-public")
        .get("cluster-info")
        .await
        .unwrap();
    assert!(info.data.unwrap().contains_key(&bt::jws_key(ID)));

    // Joined: a second join refuses to run.
    std::fs::write(&kubeconfig, "").unwrap();
    let again = join(&server, dir.path(), ["--token", &token], &ca_pin(&server), &[]).await;
    assert_eq!(again.code, Some(1));
    assert!(again.stderr.contains("has joined already"), "{}", again.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn j1_join_stops_on_a_wrong_hash_a_wrong_secret_or_an_unknown_token() {
    // A server that authenticates every other request: discovery is anonymous.
    let server = TestApiServer::builder().tls().token("admin-token").start().await.unwrap();
    server.add_bootstrap_token(ID, SECRET).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let token = format!("{ID}.{SECRET}");
    let nothing_written = || {
        assert!(
            std::fs::read_dir(dir.path()).unwrap().next().is_none(),
            "a failed join wrote files"
        );
    };

    let wrong_pin = Pin::of_spki(b"another cluster's CA").to_string();
    let out = join(&server, dir.path(), ["--token", &token], &wrong_pin, &[]).await;
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    assert!(
        out.stderr.contains("public key hash") && out.stderr.contains(&ca_pin(&server)),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains(&wrong_pin), "{}", out.stderr);
    println!("J1 join refused, wrong hash, in {:.0?}: {}", out.took, out.stderr.trim());
    nothing_written();

    let out = join(
        &server,
        dir.path(),
        ["--token", &format!("{ID}.ffffffffffffffff")],
        &ca_pin(&server),
        &[],
    )
    .await;
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    assert!(
        out.stderr.contains("JWS signature of cluster-info does not match token"),
        "{}",
        out.stderr
    );
    println!("J1 join refused, wrong secret, in {:.0?}: {}", out.took, out.stderr.trim());
    nothing_written();

    let out = join(
        &server,
        dir.path(),
        ["--token", "zzzzzz.0123456789abcdef"],
        &ca_pin(&server),
        &["--discovery-timeout", "2s"],
    )
    .await;
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    assert!(out.stderr.contains("no signature for token id \"zzzzzz\""), "{}", out.stderr);
    assert!(out.stderr.contains("--discovery-timeout"), "{}", out.stderr);
    println!("J1 join gave up, unknown token, in {:.0?}", out.took);
    nothing_written();

    // A malformed token never reaches the server.
    let before = server.total_requests();
    let out = join(&server, dir.path(), ["--token", "ABC.def"], &ca_pin(&server), &[]).await;
    assert_eq!(out.code, Some(2), "clap refuses it: {}", out.stderr);
    assert!(out.stderr.contains("ID.SECRET"), "{}", out.stderr);
    assert_eq!(server.total_requests(), before);
}
