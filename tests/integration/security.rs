//! Security defaults of `outpost run`: who may write the manifest directory, the state
//! directory's mode, and secrets kept out of the agent's logs.

use outpost_tests::needs;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use outpost_tests::agent::Agent;
use outpost_tests::manifest_server::ManifestServer;
use outpost_tests::{is_root, outpost_bin, pod_yaml, prerequisite};

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// `outpost run --dry-run` that is expected to refuse to start: its stderr.
fn refused(manifests: &Path, state: &Path) -> String {
    let out = Command::new(outpost_bin())
        .args(["run", "--dry-run", "--node-name", "edge-1", "--listen", "127.0.0.1:0"])
        .arg("--manifest-dir")
        .arg(manifests)
        .arg("--state-dir")
        .arg(state)
        .output()
        .unwrap();
    assert!(!out.status.success(), "the agent started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[needs(root)]
#[test]
fn a_manifest_dir_others_can_write_is_refused_unless_allowed() {
    prerequisite(is_root(), "root (to give a directory to another user)");
    let scratch = tempfile::tempdir().unwrap();
    let manifests = scratch.path().join("manifests");
    fs::create_dir(&manifests).unwrap();
    fs::write(manifests.join("web.yaml"), pod_yaml("web", "nginx:1")).unwrap();
    let state = scratch.path().join("state");

    chmod(&manifests, 0o777);
    let stderr = refused(&manifests, &state);
    assert!(stderr.contains("the manifest directory"), "{stderr}");
    assert!(stderr.contains(&format!("chmod go-w {}", manifests.display())), "{stderr}");
    assert!(stderr.contains("--allow-writable-manifest-dir"), "{stderr}");
    assert!(!state.exists(), "nothing was started or written before refusing");

    // Given away to another user: the fix is chown.
    chmod(&manifests, 0o755);
    nix::unistd::chown(&manifests, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    let stderr = refused(&manifests, &state);
    assert!(stderr.contains(&format!("chown root {}", manifests.display())), "{stderr}");

    // The operator's override.
    let agent = Agent::start_args(
        &manifests,
        &["--allow-writable-manifest-dir".as_ref(), "--state-dir".as_ref(), state.as_os_str()],
    );
    assert_eq!(agent.delta()["name"], "web-edge-1");
    agent.wait_for_log("not checking who may write the manifest and images directories");
}

#[test]
fn the_state_dir_is_made_private() {
    let scratch = tempfile::tempdir().unwrap();
    chmod(scratch.path(), 0o755);
    let manifests = scratch.path().join("manifests");
    fs::create_dir(&manifests).unwrap();
    let fresh = scratch.path().join("var/lib/outpost");
    let agent = Agent::start_args(&manifests, &["--state-dir".as_ref(), fresh.as_os_str()]);
    assert_eq!(mode(&fresh), 0o700);
    agent.stop();

    let loose = scratch.path().join("loose");
    fs::create_dir(&loose).unwrap();
    chmod(&loose, 0o755);
    let agent = Agent::start_args(&manifests, &["--state-dir".as_ref(), loose.as_os_str()]);
    assert_eq!(mode(&loose), 0o700);
    agent.wait_for_log("its group and other permissions were removed");
}

/// The bearer token, a manifest URL's header value and a pushed request's credentials
/// appear nowhere in the agent's log, even at trace level.
#[test]
fn secrets_are_never_logged() {
    const TOKEN: &str = "tok-3f9c2a7e51";
    const HEADER: &str = "hdr-8d41b6c092";
    let scratch = tempfile::tempdir().unwrap();
    let manifests = scratch.path().join("manifests");
    fs::create_dir(&manifests).unwrap();
    let token = scratch.path().join("token");
    fs::write(&token, format!("{TOKEN}\n")).unwrap();
    chmod(&token, 0o600);
    let server = ManifestServer::start(&pod_yaml("fetched", "nginx:1"));
    let state = scratch.path().join("state");
    let mut command = Command::new(outpost_bin());
    command.env("OUTPOST_LOG", "trace");
    let header = format!("Authorization: Bearer {HEADER}");
    let agent = Agent::start_with(
        command,
        &manifests,
        &[
            "--token-file".as_ref(),
            token.as_os_str(),
            "--manifest-url".as_ref(),
            server.url().as_ref(),
            "--manifest-url-header".as_ref(),
            header.as_ref(),
            "--state-dir".as_ref(),
            state.as_os_str(),
        ],
    );
    agent.poll("/pods", |_, body| body.contains("fetched-edge-1"));
    assert_eq!(server.last_header("authorization").as_deref(), Some(&*format!("Bearer {HEADER}")));
    let body = pod_yaml("pushed", "nginx:1");
    let auth = format!("Bearer {TOKEN}");
    let (status, answer) =
        agent.request("PUT", "/manifests/pushed", &[("Authorization", &auth)], body.as_bytes());
    assert!((200..300).contains(&status), "{status} {answer}");
    let (status, _) =
        agent.request("PUT", "/manifests/x", &[("Authorization", "Bearer wrong-secret-77")], b"");
    assert_eq!(status, 401);
    agent.poll("/pods", |_, body| body.contains("pushed-edge-1"));
    let log = agent.log();
    assert!(log.contains("TRACE") || log.contains("trace"), "trace logging is on");
    for secret in [TOKEN, HEADER, "wrong-secret-77"] {
        assert!(!log.contains(secret), "{secret} was logged:\n{log}");
    }
}
