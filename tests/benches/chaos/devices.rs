//! The device-plugin faults (issue 54; D1, D2 under chaos). The test device plugin
//! (`tests/device-plugin`) serves three devices of [`RESOURCE`] in the rig's device-plugin
//! directory; a static pod, the holder, runs with one of them; then the plugin is
//! - killed (`kill -9`) while an `Allocate` for a second pod hangs,
//! - restarted with new device IDs,
//! - restarted hung on `ListAndWatch` (it registers, then sends nothing), or
//! - left running with its socket deleted,
//!
//! while the churn goes on. What must hold, besides the trial's settle (the churn's pods
//! start whatever the plugin does): the holder runs on in the same container with the
//! same device; no device is given to two running containers; a pod that asked during
//! the fault (the taker) ends running or refused with kubelet's `UnexpectedAdmissionError`,
//! never stuck, and one that asks once the plugin serves again (the late pod) runs; the
//! Node's capacity and allocatable converge on what the plugin serves (none allocatable
//! while it is gone or lists nothing). The fault's pods and plugin are removed before the
//! trial settles.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use outpost_tests::device_plugin::{PluginArgs, PluginProcess, char_device};

use super::churn::Model;
use super::faults::{Outcome, wait_for};
use super::rig::{NODE, Rig};

/// The extended resource the chaos plugin serves.
pub const RESOURCE: &str = "example.com/chaos";
/// The plugin's socket in the device-plugin directory.
const SOCKET: &str = "chaos.sock";
/// How long the Node, a pod or the plugin may take to show what is awaited.
const WAIT: Duration = Duration::from_secs(60);
/// The Node's (capacity, allocatable) of [`RESOURCE`] while the plugin serves its three
/// devices, and once it is gone (kubelet keeps them, unhealthy, for a grace period).
const SERVING: (&str, &str) = ("3", "3");
const GONE: (&str, &str) = ("3", "0");
/// Prints the device it was given, then runs until SIGTERM.
const HOLD: &str = "echo devices=$OUTPOST_TEST_DEVICES; trap 'exit 0' TERM; \
                    while true; do sleep 0.1; done";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginFault {
    /// `kill -9` of the plugin while an `Allocate` hangs.
    KilledMidAllocate,
    /// The plugin restarted with other device IDs.
    NewDeviceIds,
    /// The plugin restarted, registering but sending no device list for a while.
    HungListAndWatch,
    /// The plugin's socket deleted under it.
    SocketDeleted,
}

impl PluginFault {
    pub fn name(self) -> &'static str {
        match self {
            PluginFault::KilledMidAllocate => "device plugin killed mid-Allocate",
            PluginFault::NewDeviceIds => "device plugin back with new device IDs",
            PluginFault::HungListAndWatch => "device plugin hung on ListAndWatch",
            PluginFault::SocketDeleted => "device plugin's socket deleted",
        }
    }
}

/// The plugin of one trial and the pods it serves.
struct Gateway<'a> {
    rig: &'a Rig,
    plugin: Option<PluginProcess>,
    /// The device IDs' prefix of the plugin now running.
    generation: u32,
    /// The fault's pods (static pods: manifest names), removed at the end.
    pods: Vec<String>,
}

impl Gateway<'_> {
    fn plugin_dir(&self) -> PathBuf {
        self.rig.path("kubelet/device-plugins")
    }

    fn control(&self, name: &str) -> PathBuf {
        self.rig.path("plugin-control").join(name)
    }

    fn ids(generation: u32) -> [String; 3] {
        [0, 1, 2].map(|i| format!("g{generation}-{i}"))
    }

    /// Starts the plugin with the devices of `generation`.
    fn start(&mut self, generation: u32) -> anyhow::Result<()> {
        let devices = self.rig.path("devices");
        std::fs::create_dir_all(&devices)?;
        std::fs::create_dir_all(self.rig.path("plugin-control"))?;
        let mut args = PluginArgs::new(RESOURCE, SOCKET);
        for (i, id) in Gateway::ids(generation).iter().enumerate() {
            let node = devices.join(format!("dev{i}"));
            if !node.exists() {
                char_device(&node);
            }
            args = args.device(id, &node);
        }
        let control = self.rig.path("plugin-control").display().to_string();
        args = args.flags(&["--control-dir", &control]);
        let stderr = self.rig.path(&format!("plugin-{generation}.stderr"));
        self.plugin = Some(PluginProcess::start(&self.plugin_dir(), &args, &stderr));
        self.generation = generation;
        Ok(())
    }

    fn kill(&mut self) {
        if let Some(mut plugin) = self.plugin.take() {
            plugin.kill();
        }
    }

    fn stderr(&self) -> String {
        self.plugin.as_ref().map(PluginProcess::stderr).unwrap_or_default()
    }

    /// The Node's (capacity, allocatable) of [`RESOURCE`] on the server.
    fn node_resources(&self) -> (String, String) {
        let node = self.rig.server.get("nodes", None, NODE).unwrap_or_default();
        let of =
            |field: &str| node["status"][field][RESOURCE].as_str().unwrap_or("none").to_owned();
        (of("capacity"), of("allocatable"))
    }

    /// Waits for the Node's `(capacity, allocatable)`; a violation when it does not come.
    fn converge(&self, want: (&str, &str), when: &str, outcome: &mut Outcome) {
        let reached = wait_for(WAIT, || {
            let (capacity, allocatable) = self.node_resources();
            (capacity == want.0 && allocatable == want.1).then_some(())
        });
        if reached.is_none() {
            outcome.violations.push(format!(
                "D1: {when}, the Node's {RESOURCE} (capacity, allocatable) is {:?}, not {want:?} within {WAIT:?}",
                self.node_resources()
            ));
        }
    }

    /// Puts a static pod that limits one device.
    fn put_pod(&mut self, name: &str) -> anyhow::Result<()> {
        let manifest = super::churn::busybox_manifest(name, HOLD).replace(
            "    command:",
            &format!("    resources:\n      limits:\n        {RESOURCE}: \"1\"\n    command:"),
        );
        let dir = self.rig.path("manifests");
        let tmp = dir.join(format!(".{name}.yaml.tmp"));
        std::fs::write(&tmp, manifest)?;
        std::fs::rename(&tmp, dir.join(format!("{name}.yaml")))?;
        self.pods.push(name.to_owned());
        Ok(())
    }

    /// The pod `name` as the agent reports it, once it runs or is refused: (container
    /// ID, the device it printed) when running, else the reason it failed.
    fn outcome_of(&self, name: &str) -> Result<(String, String), String> {
        let pod = format!("{name}-{NODE}");
        let seen = wait_for(WAIT, || {
            let pods = self.rig.pods().ok()?;
            let p = pods.get(&pod)?;
            if p["status"]["phase"] == "Failed" {
                let reason = p["status"]["reason"].as_str().unwrap_or_default();
                return Some(Err(format!("{reason}: {}", p["status"]["message"])));
            }
            let status = &p["status"]["containerStatuses"][0];
            status["state"]["running"].is_object().then_some(())?;
            let id = status["containerID"].as_str()?.to_owned();
            let uid = p["metadata"]["uid"].as_str()?;
            let log = self.rig.path("logs").join(format!("default_{pod}_{uid}/main/0.log"));
            let text = std::fs::read_to_string(log).ok()?;
            let device = text.lines().find_map(|l| l.split("devices=").nth(1))?.to_owned();
            Some(Ok((id, device)))
        });
        seen.unwrap_or_else(|| Err(format!("neither running nor refused within {WAIT:?}")))
    }

    /// Removes the fault's pods and stops the plugin; notes what did not go.
    fn clean_up(&mut self, outcome: &mut Outcome) {
        for name in std::mem::take(&mut self.pods) {
            let _ = std::fs::remove_file(self.rig.path("manifests").join(format!("{name}.yaml")));
            let pod = format!("{name}-{NODE}");
            let gone = wait_for(WAIT, || {
                self.rig.pods().ok().is_some_and(|pods| !pods.contains_key(&pod)).then_some(())
            });
            if gone.is_none() {
                outcome.notes.push(format!("the {pod} pod was not removed within {WAIT:?}"));
            }
        }
        for name in ["hang-allocate", "hang-list-and-watch"] {
            let _ = std::fs::remove_file(self.control(name));
        }
        // SIGTERM: the plugin removes its socket; the Node keeps the devices, unhealthy,
        // for kubelet's grace period.
        self.plugin = None;
    }
}

/// Runs `fault` on the rig (with the churn `model` going on); fills `outcome`.
pub fn inject(
    rig: &Rig,
    model: &mut Model,
    fault: PluginFault,
    rng: &mut fastrand::Rng,
    outcome: &mut Outcome,
) -> anyhow::Result<()> {
    let mut gateway = Gateway { rig, plugin: None, generation: 0, pods: Vec::new() };
    let result = trial(&mut gateway, model, fault, rng, outcome);
    gateway.clean_up(outcome);
    result
}

fn trial(
    g: &mut Gateway<'_>,
    model: &mut Model,
    fault: PluginFault,
    rng: &mut fastrand::Rng,
    outcome: &mut Outcome,
) -> anyhow::Result<()> {
    let suffix = rng.u32(..1_000_000);
    g.start(suffix)?;
    g.converge(SERVING, "the plugin started", outcome);
    let holder = format!("holder-{suffix}");
    g.put_pod(&holder)?;
    let (held_container, held_device) = match g.outcome_of(&holder) {
        Ok(held) => held,
        Err(why) => {
            outcome.violations.push(format!("D2: the holder did not run with a device: {why}"));
            return Ok(());
        }
    };
    // The taker asks during the fault: kubelet, too, refuses it when its Allocate fails
    // or no device is listed yet, so it may end either way, but not stuck.
    let taker = format!("taker-{suffix}");
    match fault {
        PluginFault::KilledMidAllocate => {
            std::fs::write(g.control("hang-allocate"), "")?;
            g.put_pod(&taker)?;
            let hung =
                wait_for(Duration::from_secs(15), || g.stderr().contains("Allocate").then_some(()));
            if hung.is_none() {
                outcome.notes.push("the taker's Allocate never reached the plugin".into());
            }
            // The churn goes on while the Allocate hangs.
            let op = model.pick(rng);
            model.apply(g.rig, op)?;
            g.kill();
            g.converge(GONE, "the plugin killed", outcome);
            std::fs::remove_file(g.control("hang-allocate"))?;
            g.start(g.generation)?;
        }
        PluginFault::NewDeviceIds => {
            g.kill();
            g.converge(GONE, "the plugin killed", outcome);
            g.put_pod(&taker)?;
            let op = model.pick(rng);
            model.apply(g.rig, op)?;
            g.start(suffix + 1)?;
        }
        PluginFault::HungListAndWatch => {
            std::fs::write(g.control("hang-list-and-watch"), "")?;
            g.kill();
            g.converge(GONE, "the plugin killed", outcome);
            g.start(g.generation)?;
            g.put_pod(&taker)?;
            let op = model.pick(rng);
            model.apply(g.rig, op)?;
            std::thread::sleep(Duration::from_millis(rng.u64(2_000..5_000)));
            if g.node_resources() != (GONE.0.to_owned(), GONE.1.to_owned()) {
                outcome.violations.push(format!(
                    "D1: a plugin that registered and listed nothing yet made the Node's {RESOURCE} {:?}",
                    g.node_resources()
                ));
            }
            std::fs::remove_file(g.control("hang-list-and-watch"))?;
        }
        PluginFault::SocketDeleted => {
            std::fs::remove_file(g.plugin_dir().join(SOCKET)).context("delete the socket")?;
            g.put_pod(&taker)?;
            let op = model.pick(rng);
            model.apply(g.rig, op)?;
            g.converge(GONE, "the plugin's socket deleted", outcome);
            // Its DaemonSet restarts a plugin that no longer serves.
            g.kill();
            g.start(g.generation)?;
        }
    }
    g.converge(SERVING, "the plugin serving again", outcome);
    let mut given = vec![held_device.clone()];
    match g.outcome_of(&taker) {
        Ok((_, device)) => given.push(device),
        Err(why) if why.starts_with("UnexpectedAdmissionError") => {
            outcome.notes.push(format!("the taker was refused as kubelet refuses it: {why}"));
        }
        Err(why) => outcome.violations.push(format!("D2: the taker: {why}")),
    }
    // Once the plugin serves again, a pod that asks gets a device no one holds.
    let late = format!("late-{suffix}");
    g.put_pod(&late)?;
    match g.outcome_of(&late) {
        Ok((_, device)) => given.push(device),
        Err(why) => {
            outcome.violations.push(format!("D2: a pod put once the plugin served again: {why}"))
        }
    }
    let distinct: std::collections::BTreeSet<&String> = given.iter().collect();
    if distinct.len() != given.len() {
        outcome.violations.push(format!(
            "D2: a device given to two running containers (holder, taker, late: {given:?})"
        ));
    }
    match g.outcome_of(&holder) {
        Ok((container, device)) if container == held_container && device == held_device => {}
        other => outcome.violations.push(format!(
            "D2: the holder's container {held_container} with {held_device} did not run on through the fault (now {other:?})"
        )),
    }
    Ok(())
}
