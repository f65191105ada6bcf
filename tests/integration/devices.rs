//! End to end: the device manager (SEMANTICS.md D1, D2, D4) through the real binary, the
//! test device plugin deployed as device plugins are (a DaemonSet-shaped pod, the
//! device-plugin directory a hostPath), real pods and the test API server. The plugin's
//! devices become the Node's capacity and allocatable; a pod that limits one runs with
//! it (the device node, the plugin's env) and the pod resources API says so to a Python
//! grpcio client; a device's health flip is the Node's allocatable; a pod asking for
//! more than is free is refused with kubelet's `UnexpectedAdmissionError`; the plugin
//! restarted registers again; the agent restarted keeps the pod and its device (kubelet's
//! checkpoint); the node rebooted with the API server away brings both pods back.

use std::path::{Path, PathBuf};

use outpost_tests::api_pods::{Cluster, LONG, NODE, api_pod, phase};
use outpost_tests::device_plugin::{PluginArgs, char_device, daemonset_pod};
use outpost_tests::needs;
use outpost_tests::pod_resources::client;
use outpost_tests::pods::eventually;
use serde_json::{Value, json};

const SERIAL: &str = "example.com/serial";
const PLUGIN_POD: &str = "serial-plugin";
/// The plugin's state directory as its pod sees it.
const POD_STATE: &str = "/var/lib/outpost-test-device-plugin";

/// A gateway: the cluster, and the plugin's devices and state on the host.
struct Gateway {
    c: Cluster,
    /// The plugin pod's state directory on the host (`health/` in it).
    state: PathBuf,
}

impl Gateway {
    /// The agent (its root directory the node's `kubelet`), two serial devices (character
    /// devices the plugin hands out by their host paths) and the plugin pod.
    fn start() -> Gateway {
        let c = Cluster::start();
        let state = c.api.node.path("plugin-state");
        std::fs::create_dir_all(state.join("health")).unwrap();
        std::fs::create_dir_all(state.join("dev")).unwrap();
        let g = Gateway { c, state };
        g.put_plugin();
        g
    }

    fn root_dir(&self) -> PathBuf {
        self.c.api.node.path("kubelet")
    }

    fn device(&self, id: &str) -> PathBuf {
        self.state.join("dev").join(id)
    }

    /// The plugin pod, as a static pod (a DaemonSet's pod on a node that may be offline).
    fn put_plugin(&self) {
        let mut args = PluginArgs::new(SERIAL, "serial.sock");
        for id in ["serial0", "serial1"] {
            let path = self.device(id);
            if !path.exists() {
                char_device(&path);
            }
            args = args.device(id, &path);
        }
        args.health_dir = Some(Path::new(POD_STATE).join("health"));
        let plugin_dir = self.root_dir().join("device-plugins");
        let pod = daemonset_pod(PLUGIN_POD, &args, &plugin_dir, &self.state);
        self.c.api.node.put("device-plugin.yaml", &pod);
    }

    /// Waits until the Node on the server has `capacity` and `allocatable` serial devices.
    fn wait_serial(&self, capacity: &str, allocatable: &str) -> Value {
        let what = format!("the Node's {SERIAL}: capacity {capacity}, allocatable {allocatable}");
        eventually(&what, LONG, || {
            self.node().is_some_and(|n| {
                n["status"]["capacity"][SERIAL] == capacity
                    && n["status"]["allocatable"][SERIAL] == allocatable
            })
        });
        self.node().unwrap_or_default()
    }

    fn node(&self) -> Option<Value> {
        self.c.server().get("nodes", None, NODE).ok()
    }

    /// An API pod whose `main` limits `count` serial devices.
    fn create_reader(&self, name: &str, count: u32) {
        let limits = json!({ SERIAL: count.to_string() });
        let container = json!({"resources": {"limits": limits}});
        self.c.create_pod(api_pod(name, container, json!({})));
    }

    /// The serial device `main` of pod `name` was given: the plugin's env names it, and
    /// its node is in the container.
    fn given(&self, name: &str) -> String {
        let pid = self.c.pid(name);
        let env = outpost_tests::api_pods::environment(pid);
        let id = env.get("OUTPOST_TEST_DEVICES").cloned().unwrap_or_default();
        assert!(["serial0", "serial1"].contains(&id.as_str()), "{name}: {env:?}");
        let node = self.device(&id).display().to_string();
        let inside = outpost_tests::api_pods::inside(pid, &node);
        let kind = std::fs::metadata(&inside).map(|m| m.file_type());
        use std::os::unix::fs::FileTypeExt;
        assert!(kind.is_ok_and(|k| k.is_char_device()), "{name}: {node} in the container");
        id
    }

    fn pod_resources(&self, call: &[&str]) -> Value {
        client(&self.root_dir().join("pod-resources/kubelet.sock"), call)
    }
}

/// D1, D2, D4: registration to the Node's allocatable, a pod's device, the pod
/// resources API, a health flip, a refusal past what is free, the plugin restarted, the
/// agent restarted.
#[needs(pods, python_grpc)]
#[test]
fn d1_d2_d4_a_plugin_pod_s_devices_reach_the_node_and_a_pod() {
    let mut g = Gateway::start();
    g.wait_serial("2", "2");

    // D2: a pod that limits one device runs with it.
    g.create_reader("reader", 1);
    let given = g.given("reader");
    let other = if given == "serial0" { "serial1" } else { "serial0" };

    // D4: the pod resources API says which device the container holds.
    let answer = g.pod_resources(&["get", "default", "reader"]);
    let devices = &answer["pod_resources"]["containers"][0]["devices"];
    assert_eq!(devices, &json!([{"resource_name": SERIAL, "device_ids": [given]}]), "{answer}");
    let listed = g.pod_resources(&["list"]);
    let names: Vec<&str> = listed["pod_resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(names.contains(&"reader") && names.iter().any(|n| n.starts_with(PLUGIN_POD)));
    let allocatable = g.pod_resources(&["allocatable"]);
    assert_eq!(allocatable["devices"].as_array().map(Vec::len), Some(2), "{allocatable}");

    // D1: the free device turns unhealthy: capacity stays, allocatable drops.
    std::fs::write(g.state.join("health").join(other), "").unwrap();
    g.wait_serial("2", "1");

    // D2: a pod that wants a second device cannot have it: kubelet's refusal.
    g.create_reader("late", 1);
    let pod = g.c.wait("late", "rejected", |p| phase(p) == "Failed");
    let status = pod.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some("UnexpectedAdmissionError"), "{status:?}");
    let message = status.message.unwrap_or_default();
    assert!(message.contains("Allocate failed due to"), "{message}");
    assert!(message.contains(SERIAL), "{message}");
    std::fs::remove_file(g.state.join("health").join(other)).unwrap();
    g.wait_serial("2", "2");

    // D1: the plugin restarted (its pod removed, then back) registers again.
    g.c.api.node.remove("device-plugin.yaml");
    eventually("the plugin's socket removed", LONG, || {
        !g.root_dir().join("device-plugins/serial.sock").exists()
    });
    g.put_plugin();
    eventually("the plugin's socket again", LONG, || {
        g.root_dir().join("device-plugins/serial.sock").exists()
    });
    g.wait_serial("2", "2");

    // D2: the agent restarted: the reader keeps its container and its device (the
    // checkpoint), and the device is still taken.
    let pid = g.c.pid("reader");
    g.c.agent.take().unwrap().stop();
    g.c.agent = Some(g.c.api.start(&[]));
    g.wait_serial("2", "2");
    assert_eq!(g.c.pid("reader"), pid, "the reader's container kept running");
    let answer = g.pod_resources(&["get", "default", "reader"]);
    let held = &answer["pod_resources"]["containers"][0]["devices"][0]["device_ids"][0];
    assert_eq!(held, &json!(given), "{answer}");
    g.create_reader("second", 1);
    assert_eq!(g.given("second"), other, "the reader's device is not given again");
}

/// D1, D2 with O (offline): the node reboots with the API server away; the plugin pod
/// and the reader come back from what the agent kept, the reader with the same device.
#[needs(pods)]
#[test]
fn d2_a_reboot_without_the_api_server_brings_back_the_plugin_and_the_pod_s_device() {
    let mut g = Gateway::start();
    g.wait_serial("2", "2");
    g.create_reader("reader", 1);
    let given = g.given("reader");
    let uid = g.c.pod("reader").metadata.uid.unwrap();
    let pid = g.c.reboot_offline("reader", &uid);
    let env = outpost_tests::api_pods::environment(pid);
    assert_eq!(env.get("OUTPOST_TEST_DEVICES"), Some(&given), "the same device after the reboot");
    let node = g.device(&given).display().to_string();
    assert!(outpost_tests::api_pods::inside(pid, &node).exists(), "{node} in the container");
}
