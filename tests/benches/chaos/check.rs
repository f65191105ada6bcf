//! The invariants a settled trial must hold, each broken one a violation (a line saying
//! what is wrong):
//! - every desired pod runs exactly once: in `/pods` as Running, in its current
//!   generation, with one running task for its container in containerd;
//! - nothing undesired is left: no task, container, shim, logger (but the one node
//!   logger), node logger registration or FIFO directory, pod cgroup, pod dir,
//!   pod mount, veth, IP allocation or active snapshot beyond what the desired pods hold,
//!   and no lease;
//! - `/pods` names the container containerd runs;
//! - once the API server is up, it shows every pod's current status (API pods, and the
//!   mirror pods of static pods).

use std::collections::{BTreeMap, BTreeSet};

use outpost_leaks::Leftover;
use serde_json::Value;

use super::churn::Model;
use super::rig::{NODE, Rig};

/// A container in containerd: its pod, name and task state.
#[derive(Debug)]
struct Container {
    id: String,
    pod_uid: String,
    name: String,
    /// `RUNNING`, `STOPPED`..., or none without a task.
    task: Option<String>,
}

/// The violations now (none: the trial has settled).
pub fn violations(rig: &Rig, model: &Model, api_up: bool) -> Vec<String> {
    let mut bad = Vec::new();
    let pods = match rig.pods() {
        Ok(pods) => pods,
        Err(e) => return vec![format!("cannot read the agent's /pods: {e:#}")],
    };
    let containers = match containers(rig) {
        Ok(containers) => containers,
        Err(e) => return vec![format!("cannot list containerd's containers: {e:#}")],
    };
    let desired = model.desired_names();
    let mut desired_uids = BTreeSet::new();
    for name in &desired {
        let Some(pod) = pods.get(name) else {
            bad.push(format!("desired pod {name} is not in /pods"));
            continue;
        };
        let uid = pod["metadata"]["uid"].as_str().unwrap_or_default().to_owned();
        desired_uids.insert(uid.clone());
        check_pod(name, pod, &uid, model, &containers, &mut bad);
    }
    for name in pods.keys().filter(|n| !desired.contains(n)) {
        bad.push(format!("undesired pod {name} is still in /pods"));
    }
    for c in containers.iter().filter(|c| !desired_uids.contains(&c.pod_uid)) {
        bad.push(format!("container {} of a pod not desired ({}) is left", c.id, c.pod_uid));
    }
    host(rig, &containers, &desired_uids, &mut bad);
    if api_up {
        api(rig, model, &pods, &mut bad);
    }
    bad
}

fn check_pod(
    name: &str,
    pod: &Value,
    uid: &str,
    model: &Model,
    containers: &[Container],
    bad: &mut Vec<String>,
) {
    let phase = pod["status"]["phase"].as_str().unwrap_or_default();
    if phase != "Running" {
        bad.push(format!("pod {name} is {phase:?}, not Running"));
    }
    let generation = model.files.get(name.trim_end_matches(&format!("-{NODE}")));
    if let Some(generation) = generation {
        let env = &pod["spec"]["containers"][0]["env"][0]["value"];
        if env.as_str() != Some(generation.to_string().as_str()) {
            bad.push(format!("pod {name} runs generation {env}, not {generation}"));
        }
    }
    let mine: Vec<&Container> = containers.iter().filter(|c| c.pod_uid == uid).collect();
    let running: Vec<&&Container> =
        mine.iter().filter(|c| c.task.as_deref() == Some("RUNNING")).collect();
    if running.len() != 1 {
        bad.push(format!("pod {name} has {} running containers, not 1", running.len()));
    }
    // G1 keeps one dead container per container name.
    if mine.len() > running.len() + 1 {
        bad.push(format!("pod {name} keeps {} dead containers", mine.len() - running.len()));
    }
    let reported = pod["status"]["containerStatuses"][0]["containerID"].as_str();
    if let [only] = running.as_slice() {
        let wanted = format!("containerd://{}", only.id);
        if reported != Some(wanted.as_str()) {
            bad.push(format!("/pods says pod {name} runs {reported:?}; containerd runs {wanted}"));
        }
        if only.name != "main" {
            bad.push(format!("pod {name} runs a container named {}", only.name));
        }
    }
}

/// The agent's containers in containerd.
fn containers(rig: &Rig) -> anyhow::Result<Vec<Container>> {
    let tasks: BTreeMap<String, String> = rig
        .ctr(&["tasks", "list"])?
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((f.first()?.to_string(), f.get(2)?.to_string()))
        })
        .collect();
    let mut found = Vec::new();
    for id in rig.ctr(&["containers", "list", "--quiet"])?.lines().map(str::trim) {
        if id.is_empty() {
            continue;
        }
        let info: Value = serde_json::from_str(&rig.ctr(&["containers", "info", id])?)?;
        let label = |key: &str| info["Labels"][key].as_str().unwrap_or_default().to_owned();
        found.push(Container {
            id: id.to_owned(),
            pod_uid: label("io.kubernetes.pod.uid"),
            name: label("io.kubernetes.container.name"),
            task: tasks.get(id).cloned(),
        });
    }
    Ok(found)
}

/// What the host holds beyond the desired pods.
fn host(rig: &Rig, containers: &[Container], uids: &BTreeSet<String>, bad: &mut Vec<String>) {
    let with_task: BTreeSet<&str> =
        containers.iter().filter(|c| c.task.is_some()).map(|c| c.id.as_str()).collect();
    let run = rig.path("run").to_string_lossy().into_owned();
    let state = rig.path("state").to_string_lossy().into_owned();
    let names_uid = |text: &str| uids.iter().any(|uid| text.contains(uid.as_str()));
    let mut veths = 0;
    let agent = rig.agent().map(|a| a.pid()).ok();
    let containerd = rig.containerd_pid();
    let processes = outpost_leaks::processes();
    // The node logger: one, on the rig's run dir (issue 38).
    let logger_state = format!(" --state-dir {run}/logger ");
    let mut node_loggers = 0;
    for leftover in rig.scope().inventory() {
        match &leftover {
            Leftover::Process(pid, _) if Some(*pid) == agent || Some(*pid) == containerd => {}
            Leftover::Process(_, cmdline) if cmdline.contains(&logger_state) => {
                node_loggers += 1;
                if node_loggers > 1 {
                    bad.push(format!("a second node logger: {leftover}"));
                }
            }
            Leftover::Process(pid, cmdline) if cmdline.contains("containerd-shim") => {
                // A grouped shim's -id names the first container of its group, which may
                // be gone while the shim serves the others (its children).
                let id = cmdline.split(' ').skip_while(|a| *a != "-id").nth(1).unwrap_or("");
                let serves = processes.iter().any(|p| p.ppid == *pid);
                if !with_task.contains(id) && !serves {
                    bad.push(format!("orphaned {leftover}"));
                }
            }
            Leftover::Process(_, cmdline) if !names_uid(cmdline) => {
                bad.push(format!("undesired {leftover}"));
            }
            Leftover::Cgroup(_) => {
                for pod in pod_cgroups(&leftover) {
                    if !names_uid(&pod) {
                        bad.push(format!("undesired pod cgroup {pod}"));
                    }
                }
            }
            Leftover::Mount(path) => {
                let path = path.to_string_lossy();
                let task_rootfs = path.contains("io.containerd.runtime.v2.task")
                    && with_task.iter().any(|id| path.contains(id));
                let ours = path == state || names_uid(&path) || task_rootfs;
                // The managed containerd's own mounts (its tmpmounts) come and go.
                if !ours && path.starts_with(&run) && !path.contains("tmpmounts") {
                    bad.push(format!("undesired {leftover}"));
                }
            }
            Leftover::Link(name) if *name != rig.bridge => veths += 1,
            Leftover::Containerd(_, "lease", id) => bad.push(format!("lease {id} is left")),
            Leftover::Containerd(_, "snapshot", id) if !containers.iter().any(|c| &c.id == id) => {
                bad.push(format!("active snapshot {id} has no container"));
            }
            _ => {}
        }
    }
    // What the node logger holds: a registration and a FIFO directory for a container with
    // a task, no more.
    for dir in ["run/logger/containers", "run/io"] {
        for entry in std::fs::read_dir(rig.path(dir)).into_iter().flatten().flatten() {
            let id = entry.file_name().to_string_lossy().into_owned();
            if !with_task.contains(id.as_str()) {
                bad.push(format!("{dir}/{id} of a container without a task is left"));
            }
        }
    }
    for dir in ["state/pods", "run/pods"] {
        for entry in std::fs::read_dir(rig.path(dir)).into_iter().flatten().flatten() {
            let uid = entry.file_name().to_string_lossy().into_owned();
            if !uids.contains(&uid) {
                bad.push(format!("pod dir {dir}/{uid} of a pod not desired is left"));
            }
        }
    }
    if veths != uids.len() {
        bad.push(format!("{veths} veths on the bridge for {} pods", uids.len()));
    }
    let ipam = rig.path(&format!("state/ipam/net-{}", rig.bridge));
    let allocated = std::fs::read_dir(&ipam)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<std::net::IpAddr>().is_ok())
        .count();
    if allocated != uids.len() {
        bad.push(format!("{allocated} IPs allocated for {} pods", uids.len()));
    }
}

/// The pod cgroups (`…/pod<uid>`) below a cgroup root.
fn pod_cgroups(root: &Leftover) -> Vec<String> {
    let Leftover::Cgroup(root) = root else { return Vec::new() };
    let mut found = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("pod") {
                found.push(entry.path().to_string_lossy().into_owned());
            } else if name == "kubepods" || name == "burstable" || name == "besteffort" {
                stack.push(entry.path());
            }
        }
    }
    found
}

/// The API server shows each pod as the agent does: API pods' status, and a mirror pod
/// per static pod.
fn api(rig: &Rig, model: &Model, pods: &BTreeMap<String, Value>, bad: &mut Vec<String>) {
    let Ok(server_pods) = rig.server.pods() else {
        bad.push("cannot list the API server's pods".into());
        return;
    };
    let server: BTreeMap<String, Value> = server_pods
        .into_iter()
        .filter_map(|p| serde_json::to_value(&p).ok())
        .filter_map(|p| Some((p["metadata"]["name"].as_str()?.to_owned(), p)))
        .collect();
    for name in model.desired_names() {
        let Some(on_server) = server.get(&name) else {
            bad.push(format!("pod {name} is not on the API server"));
            continue;
        };
        let phase = on_server["status"]["phase"].as_str().unwrap_or_default();
        let id = on_server["status"]["containerStatuses"][0]["containerID"].as_str();
        let agent_id = pods
            .get(&name)
            .and_then(|p| p["status"]["containerStatuses"][0]["containerID"].as_str());
        if phase != "Running" || id != agent_id {
            bad.push(format!(
                "the API server shows pod {name} as {phase:?} running {id:?}; the agent runs {agent_id:?}"
            ));
        }
    }
    let desired = model.desired_names();
    for name in server.keys().filter(|n| !desired.contains(n)) {
        bad.push(format!("pod {name} is left on the API server"));
    }
}
