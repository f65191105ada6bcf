//! Packaging for systemd: the unit verifies, the agent speaks sd_notify, install.sh is
//! idempotent and keeps an edited config, and the RBAC manifest has the right shape.

use outpost_tests::needs;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use outpost_tests::agent::Agent;
use outpost_tests::{container_log_bin, outpost_bin, prerequisite};

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

#[needs(systemd_analyze)]
#[test]
fn unit_passes_systemd_analyze_verify() {
    let analyze = Command::new("systemd-analyze").arg("--version").output();
    prerequisite(analyze.is_ok_and(|o| o.status.success()), "systemd-analyze (Debian systemd)");
    let unit = std::fs::read_to_string(deploy().join("outpost.service")).unwrap();
    assert!(
        unit.contains(
            "\nExecStart=/usr/local/bin/outpost run --config /etc/outpost/outpost.yaml\n"
        )
    );
    // verify checks that ExecStart's binary exists: point it at the one just built.
    let unit = unit.replace(
        "ExecStart=/usr/local/bin/outpost ",
        &format!("ExecStart={} ", outpost_bin().display()),
    );
    verify_unit(&unit);
}

/// Runs `systemd-analyze verify` on the unit `text`: it must pass without a complaint.
fn verify_unit(text: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("outpost.service");
    std::fs::write(&path, text).unwrap();
    let out = Command::new("systemd-analyze").arg("verify").arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "systemd-analyze verify failed: {stderr}");
    let complaints: Vec<&str> = stderr.lines().filter(|l| l.contains("outpost.service")).collect();
    assert!(complaints.is_empty(), "systemd-analyze verify complains: {complaints:#?}");
}

/// V3: `outpost-state-key` (with the null key here: the machine's host key is left alone)
/// seals a key once, keeps it on a second run, and its drop-in verifies with the unit.
#[needs(systemd_analyze, systemd_creds)]
#[test]
fn the_state_key_and_its_drop_in_are_made_once_and_verify() {
    let root = tempfile::tempdir().unwrap();
    let make = || {
        let out = Command::new("sh")
            .arg(deploy().join("outpost-state-key"))
            .arg("--root")
            .arg(root.path())
            .args(["--with-key", "tpm2-absent"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(make().contains("made "));
    let sealed = root.path().join("etc/credstore.encrypted/outpost.state-key");
    let first = std::fs::read(&sealed).unwrap();
    assert_eq!(std::fs::metadata(&sealed).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(make().contains("kept "));
    assert_eq!(std::fs::read(&sealed).unwrap(), first, "a second run kept the key");
    let dropin = root.path().join("etc/systemd/system/outpost.service.d/state-key.conf");
    let dropin = std::fs::read_to_string(dropin).unwrap();
    let unit = std::fs::read_to_string(deploy().join("outpost.service")).unwrap();
    let unit = unit.replace(
        "ExecStart=/usr/local/bin/outpost ",
        &format!("ExecStart={} ", outpost_bin().display()),
    );
    // A drop-in's sections merge into the unit's, as appending them does.
    verify_unit(&format!("{unit}\n{dropin}"));
}

/// Receives datagrams until one contains `wanted`; returns them all. A signal to the
/// test process (another test's child exiting, a handler another test installed)
/// interrupts a `recv` with EINTR: it is retried.
fn receive_until(socket: &UnixDatagram, wanted: &str) -> Vec<String> {
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 4096];
    loop {
        match socket.recv(&mut buf) {
            Ok(n) => {
                let message = String::from_utf8_lossy(&buf[..n]).into_owned();
                let done = message.lines().any(|l| l == wanted);
                seen.push(message);
                if done {
                    return seen;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("no {wanted} from the agent ({e}); received {seen:#?}"),
        }
    }
}

#[test]
fn agent_notifies_ready_watchdog_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("manifests");
    std::fs::create_dir(&manifests).unwrap();
    let path = dir.path().join("notify");
    let socket = UnixDatagram::bind(&path).unwrap();
    // Only to avoid hanging: the agent is expected well within it.
    socket.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut command = Command::new(outpost_bin());
    command.env("NOTIFY_SOCKET", &path).env("WATCHDOG_USEC", "200000");
    let agent = Agent::start_with(command, &manifests, &[] as &[&str]);

    let messages = receive_until(&socket, "READY=1");
    let ready = messages.last().unwrap();
    assert!(
        ready.lines().any(|l| l.starts_with("STATUS=") && l.contains("all pod sources seen")),
        "READY=1 comes with a status: {ready:?}"
    );
    let mut pings = messages.iter().filter(|m| m.as_str() == "WATCHDOG=1").count();
    while pings < 2 {
        receive_until(&socket, "WATCHDOG=1");
        pings += 1;
    }

    agent.stop();
    let messages = receive_until(&socket, "STOPPING=1");
    let stopping = messages.last().unwrap();
    assert!(stopping.contains("STATUS=SIGTERM"), "{stopping:?}");
}

/// Every path below `root` with its mode and, for files, its content.
fn tree(root: &Path) -> BTreeMap<PathBuf, (u32, Option<Vec<u8>>)> {
    let mut listing = BTreeMap::new();
    let mut todo = vec![root.to_owned()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let content = if meta.is_dir() {
                todo.push(path.clone());
                None
            } else {
                Some(std::fs::read(&path).unwrap())
            };
            let relative = path.strip_prefix(root).unwrap().to_owned();
            listing.insert(relative, (meta.permissions().mode(), content));
        }
    }
    listing
}

fn install(root: &Path, extra: &[&str]) -> std::process::Output {
    let out = Command::new("sh")
        .arg(deploy().join("install.sh"))
        .arg("--root")
        .arg(root)
        .arg("--binary")
        .arg(outpost_bin())
        .args(extra)
        .output()
        .unwrap();
    eprintln!(
        "install.sh: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn install_is_idempotent_and_keeps_an_edited_config() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    assert!(install(root, &[]).status.success());
    let first = tree(root);
    let out = install(root, &[]);
    assert!(out.status.success());
    assert_eq!(tree(root), first, "a second run changed the tree");
    assert!(String::from_utf8_lossy(&out.stdout).contains("systemctl enable --now outpost"));

    let mode = |p: &str| first[Path::new(p)].0 & 0o7777;
    assert_eq!(mode("usr/local/bin/outpost"), 0o755);
    // The container logger, from beside the --binary.
    assert_eq!(mode("usr/local/bin/outpost-container-log"), 0o755);
    assert_eq!(
        first[Path::new("usr/local/bin/outpost-container-log")].1.as_deref(),
        Some(std::fs::read(container_log_bin()).unwrap().as_slice())
    );
    assert_eq!(mode("etc/outpost/manifests"), 0o755, "manifests: root-writable only");
    // V3: the state key's maker is installed; the key itself is made on the box only (it is
    // sealed to that host's TPM2 or key).
    assert_eq!(mode("usr/local/sbin/outpost-state-key"), 0o755);
    assert!(!first.keys().any(|p| p.starts_with("etc/credstore.encrypted")), "{first:?}");
    assert_eq!(mode("var/lib/outpost"), 0o700);
    assert!(first.contains_key(Path::new("var/lib/outpost/images")));
    assert!(first.contains_key(Path::new("etc/systemd/system/outpost.service")));
    assert!(first.contains_key(Path::new("etc/outpost/manifests/hello.yaml")));
    let default = std::fs::read(deploy().join("outpost.yaml")).unwrap();
    let config = root.join("etc/outpost/outpost.yaml");
    assert_eq!(std::fs::read(&config).unwrap(), default);

    // An edited config survives; the new default lands beside it.
    let mut edited = default.clone();
    edited.extend_from_slice(b"nodeName: edge-7\n");
    std::fs::write(&config, &edited).unwrap();
    let out = install(root, &[]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("outpost.yaml.new"));
    assert_eq!(std::fs::read(&config).unwrap(), edited);
    assert_eq!(std::fs::read(root.join("etc/outpost/outpost.yaml.new")).unwrap(), default);

    // Example pods go only into an empty manifest directory.
    std::fs::remove_file(root.join("etc/outpost/manifests/hello.yaml")).unwrap();
    assert!(install(root, &[]).status.success());
    assert!(!root.join("etc/outpost/manifests/hello.yaml").exists());

    // A group- or world-writable manifest directory is repaired.
    let manifests = root.join("etc/outpost/manifests");
    std::fs::set_permissions(&manifests, std::fs::Permissions::from_mode(0o777)).unwrap();
    assert!(install(root, &[]).status.success());
    let mode = std::fs::metadata(&manifests).unwrap().permissions().mode();
    assert_eq!(mode & 0o022, 0, "manifests dir mode {mode:o}");

    // systemctl is never run for another root.
    let out = install(root, &["--enable"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--root /"));
}

#[test]
fn install_from_a_release_layout_uses_the_binary_beside_it() {
    // Laid out as `cargo xtask dist` packs outpost-<version>/ (without the release build).
    let release = tempfile::tempdir().unwrap();
    let release = release.path();
    std::fs::create_dir_all(release.join("bin")).unwrap();
    std::fs::copy(outpost_bin(), release.join("bin/outpost")).unwrap();
    std::fs::copy(container_log_bin(), release.join("bin/outpost-container-log")).unwrap();
    for name in ["install.sh", "outpost-state-key", "outpost.service", "outpost.yaml"] {
        std::fs::copy(deploy().join(name), release.join(name)).unwrap();
    }
    std::fs::create_dir(release.join("manifests")).unwrap();
    std::fs::copy(deploy().join("manifests/hello.yaml"), release.join("manifests/hello.yaml"))
        .unwrap();

    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let out = Command::new("sh")
        .arg(release.join("install.sh"))
        .arg("--root")
        .arg(root)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "install.sh from the release layout failed: {stderr}");
    let installed = std::fs::read(root.join("usr/local/bin/outpost")).unwrap();
    assert!(installed == std::fs::read(outpost_bin()).unwrap(), "not the release's bin/outpost");
    let logger = std::fs::read(root.join("usr/local/bin/outpost-container-log")).unwrap();
    assert!(logger == std::fs::read(container_log_bin()).unwrap(), "not the release's logger");
    assert_eq!(
        std::fs::read(root.join("etc/systemd/system/outpost.service")).unwrap(),
        std::fs::read(deploy().join("outpost.service")).unwrap()
    );
    assert!(root.join("etc/outpost/manifests/hello.yaml").exists());
}

fn allows(rules: &[PolicyRule], group: &str, resource: &str, verb: &str) -> bool {
    rules.iter().any(|r| {
        r.api_groups.as_ref().is_some_and(|g| g.iter().any(|g| g == group))
            && r.resources.as_ref().is_some_and(|rs| rs.iter().any(|r| r == resource))
            && r.verbs.iter().any(|v| v == verb)
    })
}

#[test]
fn rbac_grants_what_the_agent_does() {
    let text = std::fs::read_to_string(deploy().join("rbac.yaml")).unwrap();
    let mut cluster_role = None;
    let mut role = None;
    let mut bindings = Vec::new();
    for value in serde_saphyr::from_multiple::<serde_json::Value>(&text).unwrap() {
        match value["kind"].as_str().unwrap() {
            "ClusterRole" => {
                cluster_role = Some(serde_json::from_value::<ClusterRole>(value).unwrap())
            }
            "Role" => role = Some(serde_json::from_value::<Role>(value).unwrap()),
            "ClusterRoleBinding" => {
                let b = serde_json::from_value::<ClusterRoleBinding>(value).unwrap();
                bindings.push((b.role_ref, b.subjects.unwrap_or_default()));
            }
            "RoleBinding" => {
                let b = serde_json::from_value::<RoleBinding>(value).unwrap();
                assert_eq!(b.metadata.namespace.as_deref(), Some("kube-node-lease"));
                bindings.push((b.role_ref, b.subjects.unwrap_or_default()));
            }
            other => panic!("unexpected kind {other} in rbac.yaml"),
        }
    }
    let cluster_role = cluster_role.expect("a ClusterRole");
    assert_eq!(cluster_role.metadata.name.as_deref(), Some("outpost-node"));
    let rules = cluster_role.rules.unwrap_or_default();
    // K5: what each request of the agent needs (the test API server holds every request
    // of the suite against this file, and `cargo xtask ci` every rule against the
    // requests); these are spot checks of the file's shape.
    for (group, resource, verbs) in [
        ("", "pods", &["get", "list", "watch", "create", "delete"][..]),
        ("", "pods/status", &["patch"]),
        ("", "nodes", &["create", "get", "list", "watch", "patch"]),
        ("", "nodes/status", &["patch"]),
        ("", "events", &["create", "patch"]),
        ("", "configmaps", &["list", "watch"]),
        ("", "secrets", &["list", "watch"]),
        ("", "persistentvolumeclaims", &["get"]),
        ("", "persistentvolumes", &["get"]),
        ("", "services", &["list", "watch"]),
        ("", "serviceaccounts/token", &["create"]),
        ("node.k8s.io", "runtimeclasses", &["list", "watch"]),
    ] {
        for verb in verbs {
            assert!(allows(&rules, group, resource, verb), "{verb} {group}/{resource}");
        }
    }
    // No more than the Node authorizer gives a node.
    for (group, resource, verb) in [
        ("", "secrets", "create"),
        ("", "secrets", "update"),
        ("", "configmaps", "patch"),
        // Pull secrets come in the pod (the API server copies its service account's).
        ("", "serviceaccounts", "get"),
        ("", "serviceaccounts", "list"),
        ("", "serviceaccounts", "create"),
        // Claims and volumes are only got (the Node authorizer refuses more).
        ("", "persistentvolumeclaims", "list"),
        ("", "persistentvolumeclaims", "watch"),
        ("", "persistentvolumes", "watch"),
        // Events are written in the core group only.
        ("events.k8s.io", "events", "create"),
    ] {
        assert!(!allows(&rules, group, resource, verb), "{verb} {resource}: no more than needed");
    }
    let role = role.expect("a Role for the Lease");
    assert_eq!(role.metadata.namespace.as_deref(), Some("kube-node-lease"));
    let rules = role.rules.unwrap_or_default();
    for verb in ["get", "create", "update"] {
        assert!(allows(&rules, "coordination.k8s.io", "leases", verb), "{verb} leases");
    }
    for name in ["outpost-node", "outpost-node-lease"] {
        let (_, subjects) = bindings
            .iter()
            .find(|(role_ref, _)| role_ref.name == name)
            .unwrap_or_else(|| panic!("no binding of {name}"));
        assert!(subjects.iter().any(|s| s.kind == "Group" && s.name == "system:nodes"));
    }
}
