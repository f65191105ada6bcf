//! The pod statuses the model reports, pure: as kubelet's `generateAPIPodStatus`
//! shapes them from what the PLEG last saw (`pkg/kubelet/kubelet_pods.go`): the phase,
//! kubelet's five conditions and each container's `state`, `lastState`, `ready`,
//! `started` and `restartCount`.

use serde_json::{Value, json};

use super::{Container, ContainerState, Pod};

pub(super) fn ready(pod: &Pod) -> bool {
    !pod.containers.is_empty()
        && pod.containers.iter().all(|c| matches!(c.state, Container::Running { .. }))
}

/// The pod's status as kubelet's `generateAPIPodStatus` shapes it.
pub(super) fn pod_status(pod: &Pod) -> Value {
    let ready = ready(pod);
    let creating = pod.containers.iter().any(|c| c.state == Container::Creating);
    let terminated = pod.containers.iter().all(|c| matches!(c.state, Container::Terminated { .. }));
    let phase = if creating {
        "Pending"
    } else if terminated && !pod.containers.is_empty() {
        "Succeeded"
    } else {
        "Running"
    };
    let truth = |value: bool| if value { "True" } else { "False" };
    let condition = |kind: &str, status: bool, since: &str| {
        let mut c = json!({ "type": kind, "status": truth(status), "lastProbeTime": null, "lastTransitionTime": since });
        if !status && (kind == "Ready" || kind == "ContainersReady") {
            c["reason"] = json!(if terminated { "PodCompleted" } else { "ContainersNotReady" });
        }
        c
    };
    let containers: Vec<Value> = pod.containers.iter().map(|c| container_status(pod, c)).collect();
    json!({
        "phase": phase,
        "conditions": [
            condition("PodReadyToStartContainers", !terminated, &pod.start_time),
            condition("Initialized", true, &pod.start_time),
            condition("Ready", ready, &pod.ready_since),
            condition("ContainersReady", ready, &pod.ready_since),
            condition("PodScheduled", true, &pod.start_time),
        ],
        "hostIP": "127.0.0.1",
        "hostIPs": [{ "ip": "127.0.0.1" }],
        "podIP": pod.pod_ip,
        "podIPs": [{ "ip": pod.pod_ip }],
        "startTime": pod.start_time,
        "qosClass": pod.qos_class,
        "containerStatuses": containers,
    })
}

fn container_status(pod: &Pod, c: &ContainerState) -> Value {
    let id = |run: u32| format!("containerd://{}-{}-{run}", pod.uid, c.name);
    let terminated = |code: u32, started: &str, finished: &str, run: u32| {
        json!({ "terminated": {
            "exitCode": code, "reason": if code == 0 { "Completed" } else { "Error" },
            "startedAt": started, "finishedAt": finished, "containerID": id(run),
        }})
    };
    let (state, ready, started, container_id) = match &c.state {
        Container::Creating => {
            (json!({ "waiting": { "reason": "ContainerCreating" } }), false, false, None)
        }
        Container::Running { started_at } | Container::Exited { started_at, .. } => (
            json!({ "running": { "startedAt": started_at } }),
            true,
            true,
            Some(id(c.restart_count)),
        ),
        Container::Restarting { .. } => {
            let (code, started, finished) = c.last.clone().unwrap_or_default();
            (
                terminated(code, &started, &finished, c.restart_count),
                false,
                false,
                Some(id(c.restart_count)),
            )
        }
        Container::Killed { started_at, .. } => (
            json!({ "running": { "startedAt": started_at } }),
            true,
            true,
            Some(id(c.restart_count)),
        ),
        Container::Terminated { code, started_at, finished_at } => (
            terminated(*code, started_at, finished_at, c.restart_count),
            false,
            false,
            Some(id(c.restart_count)),
        ),
    };
    let last = match (&c.state, &c.last) {
        (
            Container::Running { .. } | Container::Exited { .. } | Container::Killed { .. },
            Some((code, started, finished)),
        ) if c.restart_count > 0 => terminated(*code, started, finished, c.restart_count - 1),
        _ => json!({}),
    };
    let mut status = json!({
        "name": c.name, "image": c.image, "imageID": "",
        "ready": ready, "started": started, "restartCount": c.restart_count,
        "state": state, "lastState": last,
    });
    if let Some(container_id) = container_id {
        status["containerID"] = json!(container_id);
    }
    status
}
