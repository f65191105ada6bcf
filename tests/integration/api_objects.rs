//! End to end: what API pods refer to (SEMANTICS.md V1–V3), through the real binary,
//! real pods and the test API server. A pod with every volume kind (configMap, secret,
//! downwardAPI, projected with a service-account token, and the `kube-api-access-*`
//! volume the API server injects) and env from objects reads what it should; a
//! ConfigMap edit shows in the container but not in a `subPath` mount; a short-lived
//! token is refreshed; optional objects may be missing, required ones keep the pod
//! waiting with kubelet's reasons until they come; after a reboot without the API
//! server the pod comes back with its objects; a static pod may not refer to a Secret;
//! pull secrets (also the service account's) are used.

use outpost_tests::needs;
use std::time::Duration;

use outpost_tests::api_pods::{Cluster, LONG, api_pod, environment, inside, read, state};
use outpost_tests::apiserver::TestApiServer;
use outpost_tests::cluster::ApiNode;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::eventually;
use serde_json::{Value, json};

const SERVICE_ACCOUNT_DIR: &str = "var/run/secrets/kubernetes.io/serviceaccount";

fn mode(pid: i32, path: &str) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    let file = inside(pid, path);
    let metadata = std::fs::metadata(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    metadata.permissions().mode() & 0o7777
}

fn config_map(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}, "data": data})
}

fn secret(name: &str, string_data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "default"}, "stringData": string_data})
}

/// The claims of a token the test API server signed (checked with its key).
fn claims(server: &TestApiServer, token: &str) -> Value {
    let claims = server.verify_token(token).unwrap_or_else(|e| panic!("{token}: {e}"));
    serde_json::to_value(claims).unwrap()
}

fn app_objects(c: &Cluster) {
    c.create(config_map(
        "app-config",
        json!({"app.conf": "listen 8080\n", "log.level": "debug", "MODE": "production"}),
    ));
    c.create(secret("app-secret", json!({"password": "s3cr3t", "user": "admin"})));
}

/// The pod of the first tests: every volume kind, env and envFrom from objects.
fn every_kind() -> Value {
    let mut pod = api_pod(
        "app",
        json!({
            "resources": {"limits": {"memory": "64Mi"}},
            "env": [
                {"name": "LOG_LEVEL", "valueFrom": {"configMapKeyRef": {"name": "app-config", "key": "log.level"}}},
                {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "app-secret", "key": "password"}}},
                {"name": "MAYBE", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "x", "optional": true}}},
            ],
            "envFrom": [{"prefix": "CFG_", "configMapRef": {"name": "app-config"}}],
            "volumeMounts": [
                {"name": "config", "mountPath": "/etc/app"},
                {"name": "config", "mountPath": "/etc/app.conf", "subPath": "app.conf"},
                {"name": "secret", "mountPath": "/etc/secret"},
                {"name": "podinfo", "mountPath": "/etc/podinfo"},
                {"name": "bundle", "mountPath": "/var/run/bundle"},
            ],
        }),
        json!({"volumes": [
            {"name": "config", "configMap": {"name": "app-config"}},
            {"name": "secret", "secret": {"secretName": "app-secret", "defaultMode": 0o400}},
            {"name": "podinfo", "downwardAPI": {"items": [
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                {"path": "memory", "resourceFieldRef": {"containerName": "main", "resource": "limits.memory", "divisor": "1Mi"}},
            ]}},
            {"name": "bundle", "projected": {"sources": [
                {"configMap": {"name": "app-config", "items": [{"key": "app.conf", "path": "conf/app.conf", "mode": 0o600}]}},
                {"secret": {"name": "app-secret", "items": [{"key": "user", "path": "user"}]}},
                {"serviceAccountToken": {"audience": "vault", "expirationSeconds": 3600, "path": "vault-token"}},
                {"downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
            ]}},
        ]}),
    );
    pod["metadata"]["labels"] = json!({"app": "web", "tier": "front"});
    pod
}

#[needs(pods)]
#[test]
fn v1_an_api_pod_with_every_volume_kind_reads_its_files_and_env() {
    let c = Cluster::start();
    app_objects(&c);
    let created = c.create_pod(every_kind());
    let uid = created.metadata.uid.clone().unwrap();
    let pid = c.pid("app");

    // configMap: every key, kubelet's atomic-writer layout, 0644.
    assert_eq!(read(pid, "/etc/app/app.conf"), "listen 8080\n");
    assert_eq!(read(pid, "/etc/app/log.level"), "debug");
    assert_eq!(mode(pid, "/etc/app/app.conf"), 0o644);
    let data = std::fs::read_link(inside(pid, "/etc/app/..data")).unwrap();
    assert!(data.to_string_lossy().starts_with("..20"), "..data -> {}", data.display());
    assert_eq!(read(pid, "/etc/app.conf"), "listen 8080\n", "the subPath mount");
    // secret: on tmpfs, defaultMode.
    assert_eq!(read(pid, "/etc/secret/password"), "s3cr3t");
    assert_eq!(mode(pid, "/etc/secret/password"), 0o400);
    let secret_dir =
        c.api.node.path(&format!("state/pods/{uid}/volumes/kubernetes.io~secret/secret"));
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let tmpfs = mountinfo.lines().find(|l| l.contains(secret_dir.to_str().unwrap()));
    assert!(tmpfs.is_some_and(|l| l.contains(" - tmpfs ")), "secrets on tmpfs: {tmpfs:?}");
    // downwardAPI: kubelet's format.
    assert_eq!(read(pid, "/etc/podinfo/labels"), "app=\"web\"\ntier=\"front\"");
    assert_eq!(read(pid, "/etc/podinfo/memory"), "64");
    // projected: items at their paths and modes, a token for its audience bound to the pod.
    assert_eq!(read(pid, "/var/run/bundle/conf/app.conf"), "listen 8080\n");
    assert_eq!(mode(pid, "/var/run/bundle/conf/app.conf"), 0o600);
    assert_eq!(read(pid, "/var/run/bundle/user"), "admin");
    assert_eq!(read(pid, "/var/run/bundle/name"), "app");
    let vault = claims(c.server(), &read(pid, "/var/run/bundle/vault-token"));
    assert_eq!(vault["aud"], json!(["vault"]), "{vault}");
    assert_eq!(vault["kubernetes.io"]["pod"]["uid"], uid, "{vault}");
    // The volume the API server injected: its token, the cluster's CA, the namespace.
    let injected = &created.spec.as_ref().unwrap().volumes.as_ref().unwrap();
    assert!(injected.iter().any(|v| v.name.starts_with("kube-api-access-")), "{injected:?}");
    let token = claims(c.server(), &read(pid, &format!("{SERVICE_ACCOUNT_DIR}/token")));
    assert_eq!(token["sub"], "system:serviceaccount:default:default", "{token}");
    assert_eq!(token["kubernetes.io"]["pod"]["name"], "app", "{token}");
    let root_ca = c.server().get("configmaps", Some("default"), "kube-root-ca.crt").unwrap();
    assert_eq!(read(pid, &format!("{SERVICE_ACCOUNT_DIR}/ca.crt")), root_ca["data"]["ca.crt"]);
    assert_eq!(read(pid, &format!("{SERVICE_ACCOUNT_DIR}/namespace")), "default");

    // env and envFrom (env wins; a missing optional one is left unset).
    let env = environment(pid);
    assert_eq!(env.get("LOG_LEVEL").map(String::as_str), Some("debug"));
    assert_eq!(env.get("DB_PASSWORD").map(String::as_str), Some("s3cr3t"));
    assert_eq!(env.get("CFG_MODE").map(String::as_str), Some("production"));
    assert_eq!(env.get("CFG_log.level").map(String::as_str), Some("debug"));
    assert!(!env.contains_key("MAYBE"), "{env:?}");

    // Only the referenced objects are watched, each alone (no cluster-wide list).
    let requests = c.server().requests();
    let lists: Vec<_> = requests
        .keys()
        .filter(|(verb, resource)| verb == "list" && resource == "secrets")
        .collect();
    assert!(!lists.is_empty(), "the referenced secret was listed: {requests:?}");
}

#[needs(pods)]
#[test]
fn v1_a_config_map_edit_shows_in_the_container_and_not_in_a_sub_path_mount() {
    let c = Cluster::start();
    app_objects(&c);
    c.create_pod(every_kind());
    let pid = c.pid("app");
    assert_eq!(read(pid, "/etc/app/app.conf"), "listen 8080\n");

    let mut edited = c.server().get("configmaps", Some("default"), "app-config").unwrap();
    edited["data"]["app.conf"] = json!("listen 9090\n");
    c.server().update(edited).unwrap();
    eventually("the edit in the container", LONG, || {
        std::fs::read_to_string(inside(pid, "/etc/app/app.conf")).ok().as_deref()
            == Some("listen 9090\n")
    });
    assert_eq!(
        read(pid, "/var/run/bundle/conf/app.conf"),
        "listen 9090\n",
        "projected volumes follow too"
    );
    assert_eq!(read(pid, "/etc/app.conf"), "listen 8080\n", "a subPath mount does not update");
    // The container was not restarted for it.
    let pod = c.pod("app");
    let statuses = pod.status.unwrap().container_statuses.unwrap();
    assert_eq!(statuses[0].restart_count, 0);
}

#[needs(pods)]
#[test]
fn v1_a_short_lived_token_is_refreshed_in_place() {
    // The real API server asks for 10 minutes at least; this one lets the test ask for 10 s.
    let config = TestApiServer::builder().min_token_expiration(Duration::from_secs(1));
    let c = Cluster::with(ApiNode::with_server(config), &[]);
    let pod = api_pod(
        "short",
        json!({"volumeMounts": [{"name": "token", "mountPath": "/var/run/token"}]}),
        json!({
            "automountServiceAccountToken": false,
            "volumes": [{"name": "token", "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 10, "path": "token"}},
            ]}}],
        }),
    );
    c.create_pod(pod);
    let pid = c.pid("short");
    let first = read(pid, "/var/run/token/token");
    let decoded =
        |token: &str| serde_json::to_value(c.server().decode_token(token).unwrap()).unwrap();
    let first_claims = decoded(&first);
    // Refreshed at 80 % of its lifetime (8 s), before it expires.
    eventually("a new token", LONG, || {
        std::fs::read_to_string(inside(pid, "/var/run/token/token")).is_ok_and(|t| t != first)
    });
    let second = decoded(&read(pid, "/var/run/token/token"));
    assert!(second["exp"].as_i64() > first_claims["exp"].as_i64(), "{first_claims} then {second}");
    let requests = c.server().count("create", "serviceaccounts/token");
    assert!(requests >= 2, "one request per token: {requests}");
}

#[needs(pods)]
#[test]
fn v1_optional_objects_may_be_missing_and_required_ones_keep_the_pod_waiting() {
    let c = Cluster::start();
    // Optional: the pod runs without them (an empty volume, an unset variable).
    c.create_pod(api_pod(
        "optional",
        json!({
            "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "x", "optional": true}}}],
            "volumeMounts": [{"name": "maybe", "mountPath": "/etc/maybe"}],
        }),
        json!({"volumes": [{"name": "maybe", "configMap": {"name": "nope", "optional": true}}]}),
    ));
    let pid = c.pid("optional");
    assert!(!environment(pid).contains_key("X"));
    let listed = std::fs::read_dir(inside(pid, "/etc/maybe")).unwrap();
    let names: Vec<String> = listed
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| !n.starts_with(".."))
        .collect();
    assert!(names.is_empty(), "{names:?}");

    // A required volume: ContainerCreating, with kubelet's FailedMount.
    c.create_pod(api_pod(
        "needs-volume",
        json!({"volumeMounts": [{"name": "config", "mountPath": "/etc/config"}]}),
        json!({"volumes": [{"name": "config", "configMap": {"name": "late"}}]}),
    ));
    // A required variable: CreateContainerConfigError, as kubelet words it.
    c.create_pod(api_pod(
        "needs-env",
        json!({"env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "late-secret", "key": "p"}}}]}),
        json!({}),
    ));
    let waiting = c.wait("needs-env", "waiting for its secret", |p| {
        state(p, "main")["waiting"]["reason"] == "CreateContainerConfigError"
    });
    assert_eq!(state(&waiting, "main")["waiting"]["message"], "secret \"late-secret\" not found");
    eventually("FailedMount for the missing configmap", LONG, || {
        c.events("needs-volume").iter().any(|e| {
            e["reason"] == "FailedMount"
                && e["message"]
                    == "MountVolume.SetUp failed for volume \"config\" : configmap \"late\" not found"
        })
    });
    let pod = c.pod("needs-volume");
    assert_eq!(state(&pod, "main")["waiting"]["reason"], "ContainerCreating");

    // They come: both pods start, without waiting out a backoff.
    c.create(config_map("late", json!({"k": "v"})));
    c.create(secret("late-secret", json!({"p": "pw"})));
    assert_eq!(read(c.pid("needs-volume"), "/etc/config/k"), "v");
    assert_eq!(environment(c.pid("needs-env")).get("P").map(String::as_str), Some("pw"));
}

#[needs(pods)]
#[test]
fn v3_after_a_reboot_without_the_api_server_the_pod_comes_back_with_its_objects() {
    let mut c = Cluster::start();
    app_objects(&c);
    let uid = c.create_pod(every_kind()).metadata.uid.unwrap();
    let before = c.pid("app");
    let token = read(before, &format!("{SERVICE_ACCOUNT_DIR}/token"));
    let private = c.api.node.path("state/checkpoints/api-objects.json");
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(std::fs::metadata(&private).unwrap().permissions().mode() & 0o777, 0o600);

    // The agent stops (the pods keep running), the network goes, the node reboots: every
    // task is gone, and so is everything on tmpfs (the run dir, the secrets' volumes).
    let after = c.reboot_offline("app", &uid);
    assert_ne!(after, before, "a new container");
    assert_eq!(read(after, "/etc/app/app.conf"), "listen 8080\n");
    assert_eq!(read(after, "/etc/secret/password"), "s3cr3t");
    assert_eq!(read(after, "/var/run/bundle/user"), "admin");
    assert_eq!(read(after, &format!("{SERVICE_ACCOUNT_DIR}/token")), token, "the kept token");
    let env = environment(after);
    assert_eq!(env.get("DB_PASSWORD").map(String::as_str), Some("s3cr3t"));
    assert_eq!(env.get("CFG_MODE").map(String::as_str), Some("production"));
    c.api.rt.block_on(c.server().restore()).unwrap();
}

/// V3: the state key as a unit gets it. `outpost-state-key` seals it with systemd-creds
/// (with the null key here, so that the machine's host key is left alone), and systemd
/// decrypts it into the agent's `$CREDENTIALS_DIRECTORY`, as `systemd-creds decrypt` does
/// here.
fn state_key_credential(dir: &std::path::Path) -> std::path::PathBuf {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/outpost-state-key");
    let root = dir.join("root");
    std::fs::create_dir(&root).unwrap();
    let made = std::process::Command::new("sh")
        .arg(script)
        .arg("--root")
        .arg(&root)
        .args(["--with-key", "tpm2-absent"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let dropin =
        std::fs::read_to_string(root.join("etc/systemd/system/outpost.service.d/state-key.conf"))
            .unwrap();
    let sealed = "/etc/credstore.encrypted/outpost.state-key";
    assert!(
        dropin.contains(&format!("\nLoadCredentialEncrypted=outpost.state-key:{sealed}\n")),
        "{dropin}"
    );
    let credentials = dir.join("credentials");
    std::fs::create_dir(&credentials).unwrap();
    let key = credentials.join("outpost.state-key");
    let opened = std::process::Command::new("systemd-creds")
        .args(["decrypt", "--name=outpost.state-key"])
        .arg(root.join(sealed.trim_start_matches('/')))
        .arg(&key)
        .output()
        .unwrap();
    assert!(opened.status.success(), "{}", String::from_utf8_lossy(&opened.stderr));
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o400)).unwrap();
    assert_eq!(std::fs::read(&key).unwrap().len(), 32);
    credentials
}

/// Every file under `dir` whose bytes hold one of `needles`, with the needle.
fn holding(dir: &std::path::Path, needles: &[String]) -> Vec<(std::path::PathBuf, String)> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() {
                let bytes = std::fs::read(entry.path()).unwrap();
                for needle in needles {
                    if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                        found.push((entry.path(), needle.clone()));
                    }
                }
            }
        }
    }
    found
}

#[needs(pods, systemd_creds)]
#[test]
fn v3_with_a_state_key_no_secret_is_on_the_disk_and_an_offline_reboot_brings_the_pod_back() {
    use base64::Engine as _;
    let keys = tempfile::tempdir().unwrap();
    let credentials = state_key_credential(keys.path());
    let env = vec![("CREDENTIALS_DIRECTORY".to_owned(), credentials)];
    let mut c = Cluster::with_env(ApiNode::new(), &[], env);
    let (password, user) = ("correct-horse-battery-staple-7f3a", "gateway-operator-91c2");
    c.create(config_map(
        "app-config",
        json!({"app.conf": "listen 8080\n", "log.level": "debug", "MODE": "production"}),
    ));
    c.create(secret("app-secret", json!({"password": password, "user": user})));
    let uid = c.create_pod(every_kind()).metadata.uid.unwrap();
    let before = c.pid("app");
    assert_eq!(read(before, "/etc/secret/password"), password);
    let token = read(before, &format!("{SERVICE_ACCOUNT_DIR}/token"));
    let log = c.agent.as_ref().unwrap().log();
    assert!(log.contains("sealed at rest"), "{log}");
    assert!(!log.contains("not encrypted at rest"), "{log}");

    // Powered off: what the disk holds, copied elsewhere as a thief would.
    c.power_off();
    let stolen = tempfile::tempdir().unwrap();
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(c.api.node.path("state"))
        .arg(stolen.path())
        .output()
        .unwrap();
    assert!(copied.status.success(), "{}", String::from_utf8_lossy(&copied.stderr));
    let checkpoint = stolen.path().join("state/checkpoints/api-objects.json");
    let header = std::fs::read(&checkpoint).unwrap();
    assert!(header.starts_with(b"outpost-checkpoint v1 sealed=chacha20-poly1305 key="));
    let base64 = base64::engine::general_purpose::STANDARD;
    let needles = [password, user, &token].map(str::to_owned);
    let encoded = needles.iter().map(|n| base64.encode(n));
    let needles: Vec<String> = needles.iter().cloned().chain(encoded).collect();
    assert_eq!(holding(stolen.path(), &needles), [], "Secrets at rest in the state directory");

    // The same key opens it: the pod comes back with its objects, offline.
    let after = c.power_on("app", &uid);
    assert_eq!(read(after, "/etc/secret/password"), password);
    assert_eq!(read(after, "/var/run/bundle/user"), user);
    assert_eq!(read(after, &format!("{SERVICE_ACCOUNT_DIR}/token")), token, "the kept token");
    assert_eq!(environment(after).get("DB_PASSWORD").map(String::as_str), Some(password));
    c.api.rt.block_on(c.server().restore()).unwrap();
}

#[needs(pods)]
#[test]
fn v3_without_a_state_key_the_agent_says_what_is_not_encrypted() {
    let c = Cluster::start();
    c.create(secret("app-secret", json!({"password": "s3cr3t"})));
    eventually("the start's log", LONG, || {
        c.agent.as_ref().unwrap().log().contains("no state key")
    });
    let log = c.agent.as_ref().unwrap().log();
    let line = log.lines().find(|l| l.contains("no state key")).unwrap();
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("checkpoints/api-objects.json"), "{line}");
    assert!(line.contains("outpost.state-key") && line.contains("--state-key-file"), "{line}");
}

#[needs(pods)]
#[test]
fn v2_a_static_pod_that_refers_to_a_secret_is_refused_even_with_an_api_server() {
    let c = Cluster::start();
    c.create(secret("app-secret", json!({"password": "s3cr3t"})));
    c.api.node.put(
        "static.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: holder}}\nspec:\n  containers:\n  - \
             {{name: main, image: {BUSYBOX_IMAGE}, imagePullPolicy: IfNotPresent, command: [sleep, \
             '3600'], volumeMounts: [{{name: s, mountPath: /s}}]}}\n  volumes:\n  - {{name: s, \
             secret: {{secretName: app-secret}}}}\n"
        ),
    );
    eventually("a FailedValidation event naming V2", LONG, || {
        c.server().list("events", None).unwrap().iter().any(|e| {
            e["reason"] == "FailedValidation"
                && e["message"].as_str().is_some_and(|m| {
                    m.contains("spec.volumes[0].secret")
                        && m.contains("static pods may not refer to API objects")
                })
        })
    });
    assert!(c.api.node.containers().is_empty(), "nothing of it runs");
    assert!(c.server().get_pod("default", "holder-edge-1").is_err(), "no mirror pod");
    assert_eq!(c.server().count("list", "secrets"), 0, "no secret looked at");
}

#[needs(pods, registry)]
#[test]
fn v1_pull_secrets_of_the_pod_and_of_its_service_account_are_used() {
    use base64::Engine as _;
    use outpost_tests::containerd::{BUSYBOX_OCI, test_image};
    use outpost_tests::registry::Registry;

    let registry = Registry::start_with_auth("puller", "right-password");
    registry.push(&test_image(BUSYBOX_OCI), "private/busybox:1", false);
    let image = format!("{}/private/busybox:1", registry.host());
    let c = Cluster::start();
    let auth = base64::engine::general_purpose::STANDARD.encode("puller:right-password");
    let config = json!({"auths": {registry.host(): {"auth": auth}}}).to_string();
    c.create(json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": "regcred", "namespace": "default"},
        "stringData": {".dockerconfigjson": config},
    }));
    c.create(json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "puller", "namespace": "default"},
        "imagePullSecrets": [{"name": "regcred"}],
    }));
    // The service account's pull secret, which the API server copies into the pod.
    let created = c.create_pod(api_pod(
        "private",
        json!({"image": image, "imagePullPolicy": "Always"}),
        json!({"serviceAccountName": "puller"}),
    ));
    let secrets = created.spec.as_ref().and_then(|s| s.image_pull_secrets.clone());
    assert_eq!(secrets.unwrap_or_default()[0].name, "regcred");
    c.wait_running("private");
    let pulled = c.events("private").iter().any(|e| e["reason"] == "Pulled");
    assert!(pulled, "{:?}", c.events("private"));

    // Without the secret the registry refuses the pull, and kubelet's warning names it.
    c.create_pod(api_pod(
        "no-credentials",
        json!({"image": image, "imagePullPolicy": "Always"}),
        json!({"imagePullSecrets": [{"name": "missing"}], "automountServiceAccountToken": false}),
    ));
    c.wait("no-credentials", "failing to pull", |p| {
        let reason = state(p, "main")["waiting"]["reason"].clone();
        reason == "ErrImagePull" || reason == "ImagePullBackOff"
    });
    eventually("FailedToRetrieveImagePullSecret", LONG, || {
        c.events("no-credentials").iter().any(|e| {
            e["reason"] == "FailedToRetrieveImagePullSecret"
                && e["message"].as_str().is_some_and(|m| m.contains("(missing)"))
        })
    });
}
