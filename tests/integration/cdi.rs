//! D3 end to end: a CDI device (a character device node, a variable, a read-only bind
//! mount) named in a pod's `cdi.k8s.io/` annotation gives the container what podman,
//! reading the same spec with its own copy of the CDI library, gives its container for
//! `--device vendor/class=name`; a device that no spec defines fails the container with
//! `CreateContainerError`, naming it.

use outpost_tests::needs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use outpost_tests::agent::Agent;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::podman::Podman;
use outpost_tests::pods::{Node, wait_pod};
use outpost_tests::workload::{delete_and_wait, pretty, status_of};

const LONG: Duration = Duration::from_secs(60);

/// Where podman 4.3 reads CDI specs (it has no setting for other directories).
const PODMAN_SPEC_DIR: &str = "/var/run/cdi";

/// What the container says of the device: the node's type, numbers, mode and owner, the
/// first bytes read from it, the variable, the mount's file and whether it is writable.
const SCRIPT: &str = "stat -c '%F %t:%T %a %u:%g' /dev/outpost-cdi; \
    head -c 4 /dev/outpost-cdi | od -An -tx1; \
    echo \"env=$OUTPOST_CDI\"; \
    cat /cdi-shared/content; \
    touch /cdi-shared/new 2>/dev/null && echo writable || echo read-only";

/// A CDI spec of one device, `outpost.test/cdi-<pid>=node`: the node `/dev/outpost-cdi`
/// taking its type and numbers from a node the test makes (char 1:5, as /dev/zero),
/// `OUTPOST_CDI=<pid>`, and a directory mounted read-only at `/cdi-shared`. The spec is
/// in `<node>/cdi` for the agent, and its copy in `/var/run/cdi` for podman, removed on
/// drop (with the directory if this made it).
struct CdiSpec {
    kind: String,
    copy: PathBuf,
    made_dir: bool,
}

impl CdiSpec {
    fn new(node: &Node) -> CdiSpec {
        let pid = std::process::id();
        let host_node = node.path("cdi-node");
        let mode = nix::sys::stat::Mode::from_bits_truncate(0o640);
        let dev = nix::sys::stat::makedev(1, 5);
        nix::sys::stat::mknod(&host_node, nix::sys::stat::SFlag::S_IFCHR, mode, dev).unwrap();
        let shared = node.path("cdi-shared");
        std::fs::create_dir_all(&shared).unwrap();
        std::fs::write(shared.join("content"), "hello from the CDI spec\n").unwrap();
        let kind = format!("outpost.test/cdi-{pid}");
        // cdiVersion 0.5.0: podman 4.3's library reads no later one (hostPath needs it);
        // fileMode given: that library does not take the mode from the host node.
        let spec = serde_json::json!({
            "cdiVersion": "0.5.0",
            "kind": kind,
            "devices": [{
                "name": "node",
                "containerEdits": {
                    "env": [format!("OUTPOST_CDI={pid}")],
                    "deviceNodes": [{
                        "path": "/dev/outpost-cdi",
                        "hostPath": host_node,
                        "fileMode": 0o640,
                    }],
                    "mounts": [{
                        "hostPath": shared,
                        "containerPath": "/cdi-shared",
                        "options": ["ro", "rbind"],
                    }],
                },
            }],
        })
        .to_string();
        let dir = node.path("cdi");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("outpost-test.json"), &spec).unwrap();
        let made_dir = std::fs::create_dir(PODMAN_SPEC_DIR).is_ok();
        let copy = Path::new(PODMAN_SPEC_DIR).join(format!("outpost-test-{pid}.json"));
        let cdi = CdiSpec { kind, copy, made_dir };
        std::fs::write(&cdi.copy, &spec).unwrap();
        cdi
    }

    fn device(&self) -> String {
        format!("{}=node", self.kind)
    }
}

impl Drop for CdiSpec {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.copy);
        if self.made_dir {
            let _ = std::fs::remove_dir(PODMAN_SPEC_DIR);
        }
    }
}

/// The agent on `node`, reading CDI specs from `<node>/cdi` only.
fn start(node: &Node) -> Agent {
    let mut args = node.args();
    args.extend(["--cdi-spec-dir".into(), node.path("cdi").into_os_string()]);
    Agent::start_pods(&node.manifests(), &args)
}

/// A pod whose container `app` runs `script` with the annotation
/// `cdi.k8s.io/test: <devices>`.
fn pod_yaml(name: &str, devices: &str, script: &str) -> String {
    let script = serde_json::to_string(script).unwrap();
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations:
    cdi.k8s.io/test: {devices}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: {BUSYBOX_IMAGE}
    command: [sh, -c, {script}]
"#
    )
}

fn lines(text: &str) -> Vec<String> {
    text.lines().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect()
}

#[needs(pods, podman)]
#[test]
fn d3_a_cdi_device_gives_the_container_what_podman_gives_it() {
    let node = Node::new();
    let cdi = CdiSpec::new(&node);
    let podman = Podman::new(&node.path("podman")).unwrap();
    let expected = podman.run_once(&["--device", &cdi.device()], SCRIPT).unwrap();
    drop(podman);
    let expected = lines(&expected);
    let pid = std::process::id();
    assert_eq!(
        expected,
        [
            "character special file 1:5 640 0:0".to_owned(),
            "00 00 00 00".to_owned(),
            format!("env={pid}"),
            "hello from the CDI spec".to_owned(),
            "read-only".to_owned(),
        ],
        "podman's container"
    );

    let agent = start(&node);
    node.put("cdi.yaml", &pod_yaml("cdi", &cdi.device(), SCRIPT));
    let pod = wait_pod(&agent, "cdi-edge-1", LONG, |p| {
        matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
    });
    assert_eq!(pod["status"]["phase"], "Succeeded", "{}", pretty(&pod));
    let (status, log) = agent.get("/containerLogs/default/cdi-edge-1/app");
    assert_eq!(status, 200, "{log}");
    assert_eq!(lines(&log), expected, "Outpost's container against podman's");
    delete_and_wait(&node, &agent, &[("cdi.yaml", "cdi-edge-1")]);
}

#[needs(pods)]
#[test]
fn d3_an_unknown_cdi_device_fails_the_container_naming_it() {
    let node = Node::new();
    std::fs::create_dir_all(node.path("cdi")).unwrap();
    std::fs::write(node.path("cdi/broken.yaml"), "kind: [").unwrap();
    let agent = start(&node);
    node.put("unknown.yaml", &pod_yaml("unknown", "vendor.example/gpu=0", "true"));
    let refused = wait_pod(&agent, "unknown-edge-1", LONG, |p| {
        status_of(p, "app")["state"]["waiting"]["reason"] == "CreateContainerError"
    });
    let message = status_of(&refused, "app")["state"]["waiting"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let expected = format!(
        "CDI device injection failed: unresolvable CDI devices vendor.example/gpu=0 (CDI spec \
         directories: {}; left out: failed to parse CDI Spec {:?}",
        node.path("cdi").display(),
        node.path("cdi/broken.yaml"),
    );
    assert!(message.starts_with(&expected), "{message}\n{expected}");
    delete_and_wait(&node, &agent, &[("unknown.yaml", "unknown-edge-1")]);
}
