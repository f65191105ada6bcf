//! The churn the faults land in: static pods added, edited and deleted in the manifest
//! directory, and API pods created and deleted through the test API server. The model
//! says which pods should run, and in which generation.

use std::collections::BTreeMap;

use anyhow::Context;
use k8s_openapi::api::core::v1::Pod;
use outpost_tests::containerd::BUSYBOX_IMAGE;

use super::rig::{NODE, Rig};

/// File pods `f-0`…`f-{FILE_PODS-1}` and API pods `a-0`…: few enough that a trial
/// settles quickly, enough that every fault meets pods in every state.
const FILE_PODS: u32 = 4;
const API_PODS: u32 = 3;

/// What should run: pod name → generation (an env var of its container; an edit bumps
/// it, which replaces the container).
#[derive(Debug, Default, Clone)]
pub struct Model {
    pub files: BTreeMap<String, u32>,
    pub api: BTreeMap<String, u32>,
}

/// One change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    PutFile(u32),
    EditFile(u32),
    DeleteFile(u32),
    CreateApi(u32),
    DeleteApi(u32),
}

impl Model {
    /// The pod names the agent reports for the desired pods (static pods get the node's
    /// name as a suffix).
    pub fn desired_names(&self) -> Vec<String> {
        self.files
            .keys()
            .map(|name| format!("{name}-{NODE}"))
            .chain(self.api.keys().cloned())
            .collect()
    }

    /// A random change that makes sense for the model.
    pub fn pick(&self, rng: &mut fastrand::Rng) -> Op {
        const ALL: [fn(u32) -> Op; 5] =
            [Op::PutFile, Op::EditFile, Op::DeleteFile, Op::CreateApi, Op::DeleteApi];
        self.pick_among(&ALL, rng)
    }

    /// A random change of one of the kinds `ops` that makes sense for the model; any
    /// change if none of those does.
    pub fn pick_among(&self, ops: &[fn(u32) -> Op], rng: &mut fastrand::Rng) -> Op {
        let mut candidates: Vec<Op> = ops
            .iter()
            .flat_map(|op| (0..FILE_PODS.max(API_PODS)).map(op))
            .filter(|op| self.valid(*op))
            .collect();
        if candidates.is_empty() {
            candidates = [Op::PutFile, Op::EditFile, Op::DeleteFile, Op::CreateApi, Op::DeleteApi]
                .iter()
                .flat_map(|op| (0..FILE_PODS.max(API_PODS)).map(op))
                .filter(|op| self.valid(*op))
                .collect();
        }
        candidates[rng.usize(..candidates.len())]
    }

    fn valid(&self, op: Op) -> bool {
        match op {
            Op::PutFile(i) => i < FILE_PODS && !self.files.contains_key(&file_name(i)),
            Op::EditFile(i) | Op::DeleteFile(i) => self.files.contains_key(&file_name(i)),
            Op::CreateApi(i) => i < API_PODS && !self.api.contains_key(&api_name(i)),
            Op::DeleteApi(i) => self.api.contains_key(&api_name(i)),
        }
    }

    /// Applies `op` to the rig and the model. An API change while the server is cut
    /// waits: the server is where API pods live.
    pub fn apply(&mut self, rig: &Rig, op: Op) -> anyhow::Result<()> {
        match op {
            Op::PutFile(i) | Op::EditFile(i) => {
                let name = file_name(i);
                let generation = self.files.get(&name).map_or(1, |g| g + 1);
                let path = rig.path("manifests").join(format!("{name}.yaml"));
                let tmp = rig.path("manifests").join(format!(".{name}.yaml.tmp"));
                std::fs::write(&tmp, file_manifest(&name, generation))?;
                std::fs::rename(&tmp, &path)?;
                self.files.insert(name, generation);
            }
            Op::DeleteFile(i) => {
                let name = file_name(i);
                std::fs::remove_file(rig.path("manifests").join(format!("{name}.yaml")))?;
                self.files.remove(&name);
            }
            Op::CreateApi(i) => {
                let name = api_name(i);
                let pod: Pod = serde_json::from_value(api_pod(&name))?;
                rig.server.create_pod(&pod).with_context(|| format!("create API pod {name}"))?;
                self.api.insert(name, 1);
            }
            Op::DeleteApi(i) => {
                let name = api_name(i);
                rig.server
                    .delete_pod("default", &name)
                    .with_context(|| format!("delete API pod {name}"))?;
                self.api.remove(&name);
            }
        }
        Ok(())
    }
}

impl Op {
    /// The name the agent reports for the pod this changes (see
    /// [`Model::desired_names`]).
    pub fn pod_name(self) -> String {
        match self {
            Op::PutFile(i) | Op::EditFile(i) | Op::DeleteFile(i) => {
                format!("{}-{NODE}", file_name(i))
            }
            Op::CreateApi(i) | Op::DeleteApi(i) => api_name(i),
        }
    }
}

fn file_name(i: u32) -> String {
    format!("f-{i}")
}

fn api_name(i: u32) -> String {
    format!("a-{i}")
}

/// A long-running container that exits cleanly on SIGTERM.
const SCRIPT: &str = "trap 'exit 0' TERM; while true; do sleep 1; done";

fn file_manifest(name: &str, generation: u32) -> String {
    let mut manifest = busybox_manifest(name, SCRIPT);
    manifest
        .push_str(&format!("    env:\n    - name: GENERATION\n      value: \"{generation}\"\n"));
    manifest
}

/// A static pod (namespace `default`, 2 s grace) of one busybox container, `main`,
/// running `script` with `sh -c`.
pub fn busybox_manifest(name: &str, script: &str) -> String {
    let script = serde_json::to_string(script).unwrap_or_default();
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: Never
    command: ["sh", "-c", {script}]
"#
    )
}

fn api_pod(name: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": "default" },
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 2,
            "containers": [{
                "name": "main",
                "image": BUSYBOX_IMAGE,
                "imagePullPolicy": "Never",
                "command": ["sh", "-c", SCRIPT],
            }]
        }
    })
}
