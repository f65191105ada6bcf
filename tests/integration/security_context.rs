//! End to end: a container's security context as the kernel sees it (issue 17, item 3):
//! `allowPrivilegeEscalation: false` sets no_new_privs, the seccomp profile (field and
//! legacy annotation) sets the filter mode and a Localhost profile under the default
//! `<state-dir>/seccomp` denies what it lists, an image whose USER is a name runs as
//! that user with its groups, and `fsGroup` owns an emptyDir. Each container prints what
//! `/proc` and the filesystem say and exits; the tests read its log.

use outpost_tests::needs;
use std::time::Duration;

use outpost_tests::agent::Agent;
use outpost_tests::containerd::{BUSYBOX_IMAGE, BUSYBOX_USER_IMAGE, BUSYBOX_USER_OCI};
use outpost_tests::pods::{Node, wait_pod};
use outpost_tests::workload::{delete_and_wait, import, pretty, status_of};

const LONG: Duration = Duration::from_secs(60);

/// The log of a container of a pod (`<name>-edge-1`) through the agent.
fn log(agent: &Agent, pod: &str, container: &str) -> String {
    let (status, body) = agent.get(&format!("/containerLogs/default/{pod}/{container}"));
    assert_eq!(status, 200, "logs of {pod}/{container}: {body}");
    body
}

fn succeeded(agent: &Agent, pod: &str) -> serde_json::Value {
    wait_pod(agent, pod, LONG, |p| {
        matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
    })
}

/// A profile that allows everything but mkdir/mkdirat (EPERM), in the Docker format.
const DENY_MKDIR: &str = r#"{
  "defaultAction": "SCMP_ACT_ALLOW",
  "archMap": [
    {"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]},
    {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]}
  ],
  "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "comment": "no new directories"}]
}"#;

/// no_new_privs and the seccomp mode of each profile, in `/proc/1/status` (no profile is
/// Unconfined, kubelet's default: `no-escalation`); a Localhost
/// profile is enforced; a missing one is a CreateContainerConfigError naming the file.
#[needs(pods)]
#[test]
fn no_new_privs_and_seccomp_profiles_reach_the_kernel() {
    let node = Node::new();
    let profiles = node.path("state/seccomp/profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::write(profiles.join("deny-mkdir.json"), DENY_MKDIR).unwrap();
    let agent = node.start();
    let status = "grep -E '^(NoNewPrivs|Seccomp):' /proc/1/status";
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: hardened
  annotations:
    container.seccomp.security.alpha.kubernetes.io/legacy: runtime/default
spec:
  restartPolicy: Never
  containers:
  - name: no-escalation
    image: {BUSYBOX_IMAGE}
    command: [sh, -c, "{status}"]
    securityContext:
      allowPrivilegeEscalation: false
  - name: runtime-default
    image: {BUSYBOX_IMAGE}
    command: [sh, -c, "{status}; mkdir /tmp/made && echo made"]
    securityContext:
      seccompProfile:
        type: RuntimeDefault
  - name: unconfined
    image: {BUSYBOX_IMAGE}
    command: [sh, -c, "{status}"]
    securityContext:
      seccompProfile:
        type: Unconfined
  - name: legacy
    image: {BUSYBOX_IMAGE}
    command: [sh, -c, "{status}"]
  - name: localhost
    image: {BUSYBOX_IMAGE}
    command: [sh, -c, "{status}; mkdir /tmp/denied; echo mkdir=$?"]
    securityContext:
      seccompProfile:
        type: Localhost
        localhostProfile: profiles/deny-mkdir.json
"#
    );
    node.put("hardened.yaml", &yaml);
    let missing = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: missing-profile
spec:
  containers:
  - name: app
    image: {BUSYBOX_IMAGE}
    command: [sleep, "3600"]
    securityContext:
      seccompProfile:
        type: Localhost
        localhostProfile: profiles/absent.json
"#
    );
    node.put("missing-profile.yaml", &missing);

    let pod = succeeded(&agent, "hardened-edge-1");
    assert_eq!(pod["status"]["phase"], "Succeeded", "{}", pretty(&pod));
    let lines = |container: &str| -> Vec<String> {
        log(&agent, "hardened-edge-1", container)
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    };
    assert_eq!(lines("no-escalation"), ["NoNewPrivs: 1", "Seccomp: 0"]);
    assert_eq!(lines("runtime-default"), ["NoNewPrivs: 0", "Seccomp: 2", "made"]);
    assert_eq!(lines("unconfined"), ["NoNewPrivs: 0", "Seccomp: 0"]);
    assert_eq!(lines("legacy"), ["NoNewPrivs: 0", "Seccomp: 2"], "the legacy annotation");
    // stderr and stdout are separate pipes: their lines may come in either order.
    let localhost = lines("localhost");
    let status: Vec<&String> = localhost
        .iter()
        .filter(|l| l.starts_with("NoNewPrivs") || l.starts_with("Seccomp"))
        .collect();
    assert_eq!(status, ["NoNewPrivs: 0", "Seccomp: 2"], "{localhost:?}");
    assert!(localhost.iter().any(|l| l.contains("Operation not permitted")), "{localhost:?}");
    assert!(localhost.iter().any(|l| l == "mkdir=1"), "{localhost:?}");

    let refused = wait_pod(&agent, "missing-profile-edge-1", LONG, |p| {
        status_of(p, "app")["state"]["waiting"]["reason"] == "CreateContainerConfigError"
    });
    let message = status_of(&refused, "app")["state"]["waiting"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let path = profiles.join("absent.json");
    assert!(
        message.contains(&format!("cannot read seccomp profile {}", path.display())),
        "{message}"
    );

    delete_and_wait(
        &node,
        &agent,
        &[("hardened.yaml", "hardened-edge-1"), ("missing-profile.yaml", "missing-profile-edge-1")],
    );
}

/// An image whose USER is a name runs as its uid and gid, with the groups /etc/group
/// gives it plus the pod's; fsGroup owns the emptyDir (setgid: new files get the group).
#[needs(pods)]
#[test]
fn a_named_image_user_and_fs_group() {
    let node = Node::new();
    import(&node, BUSYBOX_USER_OCI);
    let agent = node.start();
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: identity
spec:
  restartPolicy: Never
  securityContext:
    supplementalGroups: [5000]
    fsGroup: 2000
    fsGroupChangePolicy: OnRootMismatch
    runAsNonRoot: true
  volumes:
  - name: data
    emptyDir: {{}}
  containers:
  - name: app
    image: {BUSYBOX_USER_IMAGE}
    command:
    - sh
    - -c
    - "id -un; grep -E '^(Uid|Gid|Groups):' /proc/self/status; busybox stat -c '%g %a' /data; touch /data/file; busybox stat -c '%g' /data/file"
    volumeMounts:
    - name: data
      mountPath: /data
"#
    );
    node.put("identity.yaml", &yaml);
    let pod = succeeded(&agent, "identity-edge-1");
    assert_eq!(pod["status"]["phase"], "Succeeded", "{}", pretty(&pod));
    let lines: Vec<String> = log(&agent, "identity-edge-1", "app")
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        lines,
        [
            "app",
            "Uid: 1000 1000 1000 1000",
            "Gid: 1000 1000 1000 1000",
            "Groups: 63 2000 5000",
            "2000 2777",
            "2000",
        ]
    );
    delete_and_wait(&node, &agent, &[("identity.yaml", "identity-edge-1")]);
}
