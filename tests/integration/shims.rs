//! End to end: containerd's runc shims grouped per pod (`--shim-grouping pod`, the
//! default, as containerd's CRI plugin does) or per node, with the start-time reaper of
//! orphaned shims telling a grouped shim that still serves a task from one left behind.

use outpost_tests::needs;
use std::time::Duration;

use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::{Node, eventually, wait_pod};
use outpost_tests::workload::shims;
use serde_json::Value;

const LONG: Duration = Duration::from_secs(60);

/// A pod shaped like kubernetes.io's init container examples: an init container that
/// prepares a file and exits (its shim with it), then two containers that run on.
fn pod_with_init(name: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  terminationGracePeriodSeconds: 2
  initContainers:
  - name: prepare
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo ready > /work/state"]
    volumeMounts:
    - name: work
      mountPath: /work
  containers:
  - name: app
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "cat /work/state; exec sleep 3600"]
    volumeMounts:
    - name: work
      mountPath: /work
  - name: helper
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
  volumes:
  - name: work
    emptyDir: {{}}
"#
    )
}

/// A pod of one container that sleeps.
fn single(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: main\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"3600\"]\n"
    )
}

/// Every container of the pod runs (its init container has completed).
fn all_running(p: &Value) -> bool {
    let running = |c: &Value| c["state"]["running"].is_object();
    p["status"]["phase"] == "Running"
        && p["status"]["containerStatuses"].as_array().is_some_and(|all| all.iter().all(running))
}

/// The containerd IDs of the pod's (non-init) containers.
fn container_ids(p: &Value) -> Vec<String> {
    let all = p["status"]["containerStatuses"].as_array().cloned().unwrap_or_default();
    let id = |c: &Value| c["containerID"].as_str().unwrap_or_default().to_owned();
    all.iter().map(id).collect()
}

/// The pid of the process that serves the container's task: its shim.
fn shim_of_task(node: &Node, id: &str) -> u32 {
    let id = id.trim_start_matches("containerd://");
    let tasks = node.ctr(&["tasks", "list"]);
    let pid: u32 = tasks
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.first() == Some(&id)).then(|| fields.get(1)?.parse().ok()).flatten()
        })
        .unwrap_or_else(|| panic!("task {id} in {tasks}"));
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat[stat.rfind(')').unwrap() + 1..].split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A pod's containers run under one shim, which outlives the container it was started
/// for (the init container, or one killed and replaced here); after a SIGKILLed agent
/// restarts, the reaper of orphaned shims leaves that shim alone although the container
/// its command line names has no task any more, and the pod runs on untouched. Deleting
/// the pod ends the shim.
#[needs(pods)]
#[test]
fn a_pods_containers_share_one_shim_that_outlives_its_first_container() {
    let node = Node::new();
    let agent = node.start();
    node.put("grouped.yaml", &pod_with_init("grouped"));
    let started = wait_pod(&agent, "grouped-edge-1", LONG, all_running);
    let ids = container_ids(&started);
    assert_eq!(ids.len(), 2, "{started}");
    let shim = shim_of_task(&node, &ids[0]);
    assert_eq!(shim_of_task(&node, &ids[1]), shim, "both containers are in one shim");
    // (containerd may run the shim binary's `delete` for a moment, as the init
    // container's task is removed once the pod's containers started.)
    eventually("the pod has one shim, and no other is left", LONG, || {
        shims(&node.namespace) == vec![shim]
    });

    // The container the shim was started for (`-id`) is gone: the init container, when
    // the pod's containers started before its shim shut down; else one of them, killed
    // and replaced here (restartPolicy Always).
    let cmdline = std::fs::read(format!("/proc/{shim}/cmdline")).unwrap();
    let args: Vec<String> =
        cmdline.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    let first = args.iter().skip_while(|a| *a != "-id").nth(1).unwrap().clone();
    let mut ids = ids;
    if ids.iter().any(|id| id.ends_with(&first)) {
        node.ctr(&["tasks", "kill", "--signal", "SIGKILL", &first]);
        let restarted = |p: &Value| {
            let statuses = p["status"]["containerStatuses"].as_array();
            all_running(p) && statuses.is_some_and(|all| all.iter().any(|c| c["restartCount"] == 1))
        };
        ids = container_ids(&wait_pod(&agent, "grouped-edge-1", LONG, restarted));
    }
    assert!(!node.ctr(&["tasks", "list"]).contains(&first), "{first} has no task");
    for id in &ids {
        assert_eq!(shim_of_task(&node, id), shim, "{id} runs in the pod's shim");
    }

    agent.signal("KILL");
    drop(agent);
    let agent = node.start();
    agent.wait_for_log("looked for shims serving no task");
    let after = wait_pod(&agent, "grouped-edge-1", LONG, all_running);
    assert_eq!(container_ids(&after), ids, "the pod ran on through the restart");
    assert_eq!(shims(&node.namespace), vec![shim], "the grouped shim was kept");
    assert!(!agent.log().contains("ended a shim left serving no task"), "{}", agent.log());

    node.remove("grouped.yaml");
    eventually("the pod's containers are removed", LONG, || node.containers().is_empty());
    eventually("the pod's shim has ended", LONG, || shims(&node.namespace).is_empty());
    drop(agent);
}

/// `--shim-grouping node`: every pod's containers run under one shim, which ends with
/// the last of them.
#[needs(pods)]
#[test]
fn shim_grouping_node_runs_every_pod_in_one_shim() {
    let node = Node::new();
    let mut args = node.args();
    args.extend(["--shim-grouping".into(), "node".into()]);
    let agent = outpost_tests::agent::Agent::start_pods(&node.manifests(), &args);
    node.put("one.yaml", &single("one"));
    node.put("two.yaml", &pod_with_init("two"));
    let one = wait_pod(&agent, "one-edge-1", LONG, all_running);
    let two = wait_pod(&agent, "two-edge-1", LONG, all_running);
    let ids: Vec<String> = container_ids(&one).into_iter().chain(container_ids(&two)).collect();
    let shim = shim_of_task(&node, &ids[0]);
    for id in &ids {
        assert_eq!(shim_of_task(&node, id), shim, "{id} is in the node's shim");
    }
    // (containerd may run the shim binary's `delete` for a moment, as pod two's init
    // container's task is removed.)
    eventually("the node's shim alone runs", LONG, || shims(&node.namespace) == vec![shim]);

    node.remove("one.yaml");
    eventually("pod one's task is gone", LONG, || node.tasks().len() == 2);
    // (containerd may run the shim binary's `delete` for a moment as it removes a task.)
    eventually("the node's shim alone runs on", LONG, || shims(&node.namespace) == vec![shim]);
    for id in container_ids(&two) {
        assert_eq!(shim_of_task(&node, &id), shim, "{id} of pod two is in the node's shim");
    }
    node.remove("two.yaml");
    eventually("every container is removed", LONG, || node.containers().is_empty());
    eventually("the node's shim has ended", LONG, || shims(&node.namespace).is_empty());
    drop(agent);
}
