//! The faults, each injected while the churn goes on, and what each must leave true on
//! top of the common invariants (`check`).

use std::time::{Duration, Instant};

use anyhow::Context;
use outpost_leaks::Leftover;
use outpost_tests::fleet::scenario::PerSecond;
use tokio_util::sync::CancellationToken;

use super::churn::{Model, Op};
use super::devices::{self, PluginFault};
use super::rig::Rig;

/// A kind of change: an [`Op`] for a pod index.
type OpKind = fn(u32) -> Op;

/// Where in the agent's work a `kill -9` lands: the debug log line it waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// A CNI plugin running (ADD of a new pod).
    Cni,
    /// Just after the pod's network is up: the sandbox and container being created.
    Create,
    /// A container being stopped (a pod deleted or edited).
    Stop,
    /// A checkpoint being written (an API pod created or deleted).
    Checkpoint,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    KillAgent(Phase),
    /// `kill -9` of the managed containerd.
    KillContainerd,
    /// `kill -9` of the managed containerd, and again as soon as the agent starts it.
    KillContainerdMidStart,
    /// `kill -9` of one runc shim: every container it serves dies with it (with
    /// `--shim-grouping node`, every container on the node).
    KillShim,
    /// `kill -9` of the node logger while a line-numbered container writes (issue 38):
    /// no line it wrote before or after may be lost or repeated.
    KillLogger,
    /// The API server cut and restored every few seconds.
    ApiFlap,
    /// The state dir full: a checkpoint write fails, the old one stays, pods run on.
    FillState,
    /// Everything but the state dir lost, and the API server unreachable at the start.
    OfflineReboot,
    /// The API server cut until the node's client certificate has expired (J2).
    CertificatesExpire,
    /// Every write the node makes refused for the flap's length while the churn goes on
    /// (O3): the server answers, but not as asked.
    ApiStorm(Storm),
    /// The device plugin misbehaves while a pod holds one of its devices (D1, D2).
    DevicePlugin(PluginFault),
    /// The agent's wall clock is wrong for a few seconds, then NTP sets it right; the API
    /// server reachable meanwhile (`true`) or cut off.
    ClockJump(Jump, bool),
}

/// How the agent's wall clock is wrong before NTP sets it right (issue 54).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jump {
    /// The box boots at 1970 (no real-time clock): the agent restarts with it.
    Boot1970,
    /// The clock steps 90 days ahead.
    Forward90Days,
    /// The clock steps a day back.
    BackOneDay,
}

/// How a storm refuses the node's writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storm {
    /// 403 from the Node authorizer (its graph lags, RBAC changes).
    Forbidden,
    /// 429 from API Priority and Fairness, with `Retry-After`.
    TooManyRequests,
    /// 503 (an upgrade).
    Unavailable,
}

/// The most requests a second the node may send on average through a storm: a node
/// that backs off sends a few (the integration tests measured 0.4 to 1.6), one that
/// retried at once what its token bucket lets through (50).
const STORM_MEAN_PER_SECOND: f64 = 5.0;
/// The `Retry-After` of a storm of 429s.
const STORM_RETRY_AFTER: u64 = 5;

/// The faults in the order trials take them (trial `i` injects `ALL[i % len]`).
pub const ALL: [Fault; 25] = [
    Fault::KillAgent(Phase::Cni),
    Fault::KillAgent(Phase::Create),
    Fault::KillAgent(Phase::Stop),
    Fault::KillAgent(Phase::Checkpoint),
    Fault::KillContainerd,
    Fault::KillContainerdMidStart,
    Fault::KillShim,
    Fault::KillLogger,
    Fault::ApiFlap,
    Fault::FillState,
    Fault::OfflineReboot,
    Fault::CertificatesExpire,
    Fault::ApiStorm(Storm::Forbidden),
    Fault::ApiStorm(Storm::TooManyRequests),
    Fault::ApiStorm(Storm::Unavailable),
    Fault::DevicePlugin(PluginFault::KilledMidAllocate),
    Fault::DevicePlugin(PluginFault::NewDeviceIds),
    Fault::DevicePlugin(PluginFault::HungListAndWatch),
    Fault::DevicePlugin(PluginFault::SocketDeleted),
    Fault::ClockJump(Jump::Boot1970, true),
    Fault::ClockJump(Jump::Boot1970, false),
    Fault::ClockJump(Jump::Forward90Days, true),
    Fault::ClockJump(Jump::Forward90Days, false),
    Fault::ClockJump(Jump::BackOneDay, true),
    Fault::ClockJump(Jump::BackOneDay, false),
];

impl Fault {
    pub fn name(self) -> String {
        match self {
            Fault::KillAgent(phase) => format!("kill -9 agent mid-{phase:?}").to_lowercase(),
            Fault::KillContainerd => "kill -9 containerd".into(),
            Fault::KillContainerdMidStart => "kill -9 containerd mid-start".into(),
            Fault::KillShim => "kill -9 a shim".into(),
            Fault::KillLogger => "kill -9 the node logger".into(),
            Fault::ApiFlap => "API server flapping".into(),
            Fault::FillState => "state dir full".into(),
            Fault::OfflineReboot => "offline reboot".into(),
            Fault::CertificatesExpire => "certificates expire while cut off".into(),
            Fault::ApiStorm(Storm::Forbidden) => "a storm of 403 on writes".into(),
            Fault::ApiStorm(Storm::TooManyRequests) => "a storm of 429 with Retry-After".into(),
            Fault::ApiStorm(Storm::Unavailable) => "a storm of 503 on writes".into(),
            Fault::DevicePlugin(fault) => fault.name().into(),
            Fault::ClockJump(jump, online) => {
                let jump = match jump {
                    Jump::Boot1970 => "clock: boot at 1970",
                    Jump::Forward90Days => "clock: 90 days ahead",
                    Jump::BackOneDay => "clock: a day back",
                };
                format!("{jump}, {}", if online { "online" } else { "offline" })
            }
        }
    }
}

/// What a trial's fault brought about, besides the common invariants.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Fault-specific invariants broken.
    pub violations: Vec<String>,
    /// Notes (e.g. a phase the kill missed and where it landed instead).
    pub notes: Vec<String>,
}

/// Injects `fault` into the running rig (with churn `model`), and brings the rig back to
/// a state that should settle: the agent running, the API server up, space returned.
pub fn inject(
    rig: &mut Rig,
    model: &mut Model,
    fault: Fault,
    rng: &mut fastrand::Rng,
    flap: Duration,
) -> anyhow::Result<Outcome> {
    let mut outcome = Outcome::default();
    match fault {
        Fault::KillAgent(phase) => {
            let (ops, needle): (&[OpKind], &str) = match phase {
                Phase::Cni => (&[Op::PutFile, Op::CreateApi], "running CNI plugin"),
                Phase::Create => (&[Op::PutFile, Op::CreateApi], "attached pod to CNI network"),
                Phase::Stop => (&[Op::EditFile, Op::DeleteFile, Op::DeleteApi], "stopping pod"),
                Phase::Checkpoint => (&[Op::CreateApi, Op::DeleteApi], "writing checkpoint"),
            };
            let lines = rig.log_lines();
            let op = model.pick_among(ops, rng);
            model.apply(rig, op)?;
            match rig.wait_for_log(needle, lines, Duration::from_secs(15)) {
                Some(_) => {
                    if phase == Phase::Create {
                        std::thread::sleep(Duration::from_millis(rng.u64(..30)));
                    }
                }
                None => outcome.notes.push(format!("{op:?}: no {needle:?} within 15 s")),
            }
            rig.kill_agent();
            rig.start()?;
        }
        Fault::KillContainerd | Fault::KillContainerdMidStart => {
            let pid = rig.containerd_pid().context("the managed containerd is not running")?;
            super::rig::kill(pid);
            let op = model.pick(rng);
            model.apply(rig, op)?;
            if fault == Fault::KillContainerdMidStart {
                let deadline = Instant::now() + Duration::from_secs(30);
                loop {
                    match rig.containerd_pid() {
                        Some(new) if new != pid => {
                            super::rig::kill(new);
                            break;
                        }
                        _ if Instant::now() > deadline => {
                            outcome.notes.push("containerd was not restarted within 30 s".into());
                            break;
                        }
                        _ => std::thread::sleep(Duration::from_millis(1)),
                    }
                }
            }
        }
        Fault::KillShim => {
            let shims: Vec<u32> = rig
                .scope()
                .inventory()
                .into_iter()
                .filter_map(|leftover| match leftover {
                    Leftover::Process(pid, cmdline) if cmdline.contains("containerd-shim") => {
                        Some(pid)
                    }
                    _ => None,
                })
                .collect();
            match rng.choice(shims) {
                Some(pid) => super::rig::kill(pid),
                None => outcome.notes.push("no shim ran to kill".into()),
            }
            let op = model.pick(rng);
            model.apply(rig, op)?;
        }
        Fault::ApiFlap => {
            let end = Instant::now() + flap;
            while Instant::now() < end {
                rig.rt.block_on(rig.server.cut());
                std::thread::sleep(Duration::from_millis(rng.u64(1_000..3_000)));
                let op = model.pick(rng);
                model.apply(rig, op)?;
                rig.rt.block_on(rig.server.restore()).context("restore the API server")?;
                std::thread::sleep(Duration::from_millis(rng.u64(1_000..3_000)));
            }
        }
        Fault::KillLogger => kill_logger(rig, model, rng, &mut outcome)?,
        Fault::FillState => fill_state(rig, model, rng, &mut outcome)?,
        Fault::OfflineReboot => offline_reboot(rig, model, &mut outcome)?,
        Fault::CertificatesExpire => certificates_expire(rig, model, rng, &mut outcome)?,
        Fault::ApiStorm(storm) => api_storm(rig, model, storm, rng, flap, &mut outcome)?,
        Fault::DevicePlugin(fault) => devices::inject(rig, model, fault, rng, &mut outcome)?,
        Fault::ClockJump(jump, online) => clock_jump(rig, model, jump, online, rng, &mut outcome)?,
    }
    Ok(outcome)
}

/// Every write of the node's refused for `length` while the churn goes on, then the
/// server answers again (the trial's settle is the recovery). The node's requests are
/// counted each second: their mean must show a node that backs off. (The authorizer's
/// refusals of a 403 storm are told from K5 violations by the trial.)
fn api_storm(
    rig: &mut Rig,
    model: &mut Model,
    storm: Storm,
    rng: &mut fastrand::Rng,
    length: Duration,
    outcome: &mut Outcome,
) -> anyhow::Result<()> {
    use outpost_tests::apiserver::Fault as Refuse;
    let fault = match storm {
        Storm::Forbidden => Refuse::forbidden(),
        Storm::TooManyRequests => Refuse::too_many_requests().retry_after(STORM_RETRY_AFTER),
        Storm::Unavailable => Refuse::unavailable(),
    };
    rig.server.storm(Some(fault));
    let counting = CancellationToken::new();
    let counter = {
        let _rt = rig.rt.enter();
        PerSecond::spawn(rig.server.request_counts(), counting.clone())
    };
    let started = Instant::now();
    let mut next_op = started + Duration::from_millis(rng.u64(500..2_000));
    while started.elapsed() < length {
        std::thread::sleep(Duration::from_secs(1));
        if Instant::now() >= next_op {
            let op = model.pick(rng);
            model.apply(rig, op)?;
            next_op = Instant::now() + Duration::from_millis(rng.u64(1_000..3_000));
        }
    }
    rig.server.storm(None);
    counting.cancel();
    let counts = rig.rt.block_on(counter).context("the storm's request counter")?.totals();
    let mean = counts.iter().sum::<u64>() as f64 / counts.len().max(1) as f64;
    let max = counts.iter().copied().max().unwrap_or_default();
    outcome.notes.push(format!("requests a second through the storm: mean {mean:.2}, max {max}"));
    if mean > STORM_MEAN_PER_SECOND {
        outcome.violations.push(format!(
            "O3: {mean:.2} requests a second through the storm (at most {STORM_MEAN_PER_SECOND})"
        ));
    }
    Ok(())
}

/// Issue 54: the agent's wall clock wrong for a few seconds (the box booted at 1970, or
/// the clock stepped 90 days ahead or a day back), the API server up or cut off, a static
/// pod changed meanwhile; then NTP sets the clock right. No pod may be restarted by it
/// (every other running container runs on), and the node may not fall back to its
/// bootstrap token while its certificate is still valid by the real time. The trial's
/// settle is the convergence after the step (Lease, statuses).
fn clock_jump(
    rig: &mut Rig,
    model: &mut Model,
    jump: Jump,
    online: bool,
    rng: &mut fastrand::Rng,
    outcome: &mut Outcome,
) -> anyhow::Result<()> {
    let Some(running_before) = steady_start(rig, model, "the clock jump", outcome)? else {
        return Ok(());
    };
    let (_, valid_until) = client_certificate_end(rig)?;
    let bootstraps = bootstrap_csrs(rig)?;
    if !online {
        rig.rt.block_on(rig.server.cut());
    }
    match jump {
        Jump::Boot1970 => {
            rig.kill_agent();
            rig.clock.set("@1970-01-01 00:00:00");
            rig.start()?;
        }
        Jump::Forward90Days => rig.clock.set("+90d"),
        Jump::BackOneDay => rig.clock.set("-1d"),
    }
    let op = model.pick_among(&[Op::PutFile, Op::EditFile, Op::DeleteFile], rng);
    model.apply(rig, op)?;
    std::thread::sleep(Duration::from_millis(rng.u64(3_000..8_000)));
    rig.clock.set("+0");
    if !online {
        rig.rt.block_on(rig.server.restore()).context("restore the API server")?;
    }
    kept_running(rig, &running_before, op, "through the clock jump", outcome)?;
    // A bootstrap after the step is the J2 recovery only if the certificate really ended.
    std::thread::sleep(Duration::from_secs(3));
    for created in bootstrap_csrs(rig)?.into_iter().skip(bootstraps.len()) {
        if created < valid_until {
            outcome.violations.push(format!(
                "J2: the node fell back to its bootstrap token at {created} with a certificate valid until {valid_until}"
            ));
        }
    }
    Ok(())
}

/// When the server's CSRs sent with a bootstrap token were made, oldest first.
fn bootstrap_csrs(rig: &Rig) -> anyhow::Result<Vec<jiff::Timestamp>> {
    let csrs = rig.server.list("certificatesigningrequests", None).context("list the CSRs")?;
    let mut created: Vec<jiff::Timestamp> = csrs
        .iter()
        .filter(|csr| {
            csr.pointer("/spec/username")
                .and_then(serde_json::Value::as_str)
                .is_some_and(|user| user.starts_with("system:bootstrap:"))
        })
        .filter_map(|csr| csr.pointer("/metadata/creationTimestamp")?.as_str()?.parse().ok())
        .collect();
    created.sort();
    Ok(created)
}

/// [`ran_on`], waiting up to half a minute for an agent that just started to report the
/// containers it adopted.
fn kept_running(
    rig: &Rig,
    before: &std::collections::BTreeMap<String, String>,
    op: Op,
    when: &str,
    outcome: &mut Outcome,
) -> anyhow::Result<()> {
    let changed = op.pod_name();
    let same = || {
        running_containers(rig).is_ok_and(|now| {
            before
                .iter()
                .filter(|(pod, _)| **pod != changed)
                .all(|(pod, c)| now.get(pod) == Some(c))
        })
    };
    if wait_for(Duration::from_secs(30), || same().then_some(())).is_none() {
        ran_on(rig, before, op, when, outcome)?;
    }
    Ok(())
}

/// What must hold once a trial settled, for its fault: after a full disk, the API pods'
/// checkpoint catches up (within 30 s) once space returns, with no further change.
pub fn after_settle(rig: &Rig, model: &Model, fault: Fault) -> Vec<String> {
    if fault != Fault::FillState {
        return Vec::new();
    }
    let path = rig.path("state/checkpoints/api.json");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let saved = std::fs::read_to_string(&path).unwrap_or_default();
        let missing: Vec<&String> =
            model.api.keys().filter(|name| !saved.contains(&format!("\"{name}\""))).collect();
        if missing.is_empty() {
            return Vec::new();
        }
        if Instant::now() > deadline {
            return vec![format!(
                "space returned, but the API pods' checkpoint still lacks {missing:?}"
            )];
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Fills the state dir's tmpfs, changes an API pod (so the API pods' checkpoint is
/// written), and checks that the write fails with a clear error, the checkpoint on disk
/// stays as it was and the running containers run on; then frees the space.
fn fill_state(
    rig: &mut Rig,
    model: &mut Model,
    rng: &mut fastrand::Rng,
    outcome: &mut Outcome,
) -> anyhow::Result<()> {
    let Some(running_before) = steady_start(rig, model, "the fill", outcome)? else {
        return Ok(());
    };
    let checkpoints = rig.path("state/checkpoints");
    let before = read_dir_files(&checkpoints);
    let filler = rig.path("state/filler");
    let free = free_bytes(&rig.path("state"))?;
    let out = std::process::Command::new("fallocate")
        .args(["-l", &free.to_string()])
        .arg(&filler)
        .output()
        .context("run fallocate")?;
    anyhow::ensure!(out.status.success(), "fallocate: {}", String::from_utf8_lossy(&out.stderr));
    let lines = rig.log_lines();
    let op = model.pick_among(&[Op::CreateApi, Op::DeleteApi], rng);
    model.apply(rig, op)?;
    let error = rig.wait_for_log("No space left on device", lines, Duration::from_secs(15));
    let log = rig.agent()?.log();
    let named =
        log.lines().skip(lines).any(|l| l.contains("No space left") && l.contains("checkpoint"));
    if error.is_none() || !named {
        outcome.violations.push(format!(
            "{op:?} with the state dir full: no error naming the checkpoint and the full disk"
        ));
    }
    let after = read_dir_files(&checkpoints);
    for (name, bytes) in &before {
        if after.get(name) != Some(bytes) {
            outcome.violations.push(format!("checkpoint {name} changed while the disk was full"));
        }
    }
    ran_on(rig, &running_before, op, "while the disk was full", outcome)?;
    std::thread::sleep(Duration::from_secs(2));
    std::fs::remove_file(&filler).context("free the state dir")?;
    Ok(())
}

/// The running containers of a settled rig, once they hold still, before `fault`: what
/// changes then is the fault's doing. Settled is not idle: churn that ends where it began
/// (an edit, then the file put back) leaves the pod's UID as it was while its worker
/// still replaces its container. `None`, with a note, when they never hold still.
fn steady_start(
    rig: &Rig,
    model: &Model,
    fault: &str,
    outcome: &mut Outcome,
) -> anyhow::Result<Option<std::collections::BTreeMap<String, String>>> {
    let (unsettled, _) = super::super::settle(rig, model, true);
    if !unsettled.is_empty() {
        outcome.notes.push(format!("{fault} began before the rig settled: {unsettled:?}"));
    }
    let steady = steady_containers(rig)?;
    if steady.is_none() {
        outcome.notes.push(format!("the running containers never held still for {fault}"));
    }
    Ok(steady)
}

/// Every pod in `before` but the one `op` changed runs on in the same container; a
/// violation for each that does not.
fn ran_on(
    rig: &Rig,
    before: &std::collections::BTreeMap<String, String>,
    op: Op,
    when: &str,
    outcome: &mut Outcome,
) -> anyhow::Result<()> {
    let changed = op.pod_name();
    let after = running_containers(rig)?;
    for (pod, container) in before.iter().filter(|(pod, _)| **pod != changed) {
        if after.get(pod) != Some(container) {
            outcome.violations.push(format!(
                "pod {pod}'s container {container} did not run on {when} (now {:?})",
                after.get(pod)
            ));
        }
    }
    Ok(())
}

/// A container that prints 0, 1, 2, ... a line each 10 ms: a gap or a repeat in its log
/// is a lost or repeated line.
const COUNTER: &str = "i=0; while true; do echo $i; i=$((i+1)); sleep 0.01; done";

/// Issue 38: `kill -9` of the node logger while the counter pod writes and the churn
/// changes a pod: the agent must start another logger, and the counter's log must hold
/// every number once and in order, from before the kill and after. The counter pod is
/// the fault's own (not the model's): it is removed before the trial settles.
fn kill_logger(
    rig: &mut Rig,
    model: &mut Model,
    rng: &mut fastrand::Rng,
    outcome: &mut Outcome,
) -> anyhow::Result<()> {
    // A name of its own each time: a static pod's UID comes from its manifest, and the
    // log of an earlier counter pod of the same name and UID may still be there.
    let name = format!("counter-{}", rng.u32(..1_000_000));
    let manifest = rig.path("manifests").join(format!("{name}.yaml"));
    let tmp = rig.path("manifests").join(format!(".{name}.yaml.tmp"));
    std::fs::write(&tmp, super::churn::busybox_manifest(&name, COUNTER))?;
    std::fs::rename(&tmp, &manifest)?;
    let pod = format!("{name}-{}", super::rig::NODE);
    let log = wait_for(Duration::from_secs(60), || {
        let pods = rig.pods().ok()?;
        let p = pods.get(&pod)?;
        let uid = p["metadata"]["uid"].as_str()?;
        let log = rig.path("logs").join(format!("default_{pod}_{uid}")).join("main/0.log");
        (counted(&log).ok()? > 20).then_some(log)
    });
    let checked = match log {
        None => {
            outcome.violations.push(format!("the {pod} pod logged no 20 lines within 60 s"));
            Ok(())
        }
        Some(log) => kill_logger_under(rig, model, rng, &log, outcome),
    };
    std::fs::remove_file(&manifest)?;
    let gone = wait_for(Duration::from_secs(60), || {
        rig.pods().ok().is_some_and(|pods| !pods.contains_key(&pod)).then_some(())
    });
    if gone.is_none() {
        outcome.notes.push(format!("the {pod} pod was not removed within 60 s"));
    }
    checked
}

fn kill_logger_under(
    rig: &mut Rig,
    model: &mut Model,
    rng: &mut fastrand::Rng,
    log: &std::path::Path,
    outcome: &mut Outcome,
) -> anyhow::Result<()> {
    let before = node_loggers(rig);
    let Some(&pid) = before.first() else {
        outcome.violations.push("no node logger runs".into());
        return Ok(());
    };
    super::rig::kill(pid);
    let op = model.pick(rng);
    model.apply(rig, op)?;
    let restarted = wait_for(Duration::from_secs(30), || {
        let now = node_loggers(rig);
        (now.len() == 1 && now[0] != pid).then_some(())
    });
    if restarted.is_none() {
        outcome.violations.push(format!(
            "no new node logger within 30 s of the kill (running: {:?})",
            node_loggers(rig)
        ));
        return Ok(());
    }
    let at_kill = counted(log).unwrap_or(0);
    let after =
        wait_for(Duration::from_secs(30), || counted(log).ok().filter(|n| *n > at_kill + 50));
    match counted(log) {
        Err(violation) => outcome.violations.push(violation),
        Ok(_) if after.is_none() => outcome
            .violations
            .push("the counter logged no 50 more lines within 30 s of the new logger".into()),
        Ok(n) => outcome.notes.push(format!("{n} counter lines, in order, none repeated")),
    }
    Ok(())
}

/// The node loggers of the rig (`outpost-container-log node` under its run dir).
fn node_loggers(rig: &Rig) -> Vec<u32> {
    rig.scope()
        .inventory()
        .into_iter()
        .filter_map(|leftover| match leftover {
            Leftover::Process(pid, cmdline)
                if cmdline.contains(" node --state-dir")
                    || cmdline.contains(" container-log-node ") =>
            {
                Some(pid)
            }
            _ => None,
        })
        .collect()
}

/// How many lines the counter's log holds, if they are 0, 1, 2, ... in order; otherwise
/// the violation.
fn counted(log: &std::path::Path) -> Result<usize, String> {
    let text = std::fs::read_to_string(log).map_err(|e| format!("{}: {e}", log.display()))?;
    for (i, line) in text.lines().enumerate() {
        let content = line.splitn(4, ' ').nth(3).unwrap_or_default();
        if content != i.to_string() {
            return Err(format!(
                "line {i} of the counter's log holds {content:?}: a line was lost or repeated across the node logger's kill -9"
            ));
        }
    }
    Ok(text.lines().count())
}

/// Polls `check` every 200 ms until it gives a value, at most `timeout`.
pub fn wait_for<T>(timeout: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return Some(value);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// J2: the API server cut past the end of the node's client certificate. While cut off
/// the agent must say it has no valid certificate and keep every pod running (a static
/// pod changed meanwhile is applied); once the server is back it must get a new
/// certificate with the bootstrap token and report the lapse on its Node
/// (`CertificateExpired` False, `CertificateReplacedAfterExpiry`).
fn certificates_expire(
    rig: &mut Rig,
    model: &mut Model,
    rng: &mut fastrand::Rng,
    outcome: &mut Outcome,
) -> anyhow::Result<()> {
    let Some(running_before) = steady_start(rig, model, "the cut", outcome)? else {
        return Ok(());
    };
    let (left, not_after) = client_certificate_end(rig)?;
    // The lapse reported must be this certificate's (an earlier fault may have left one).
    let expired_at = format!("expired at {}", not_after.strftime("%Y-%m-%dT%H:%M:%SZ"));
    let lines = rig.log_lines();
    rig.rt.block_on(rig.server.cut());
    let op = model.pick_among(&[Op::PutFile, Op::EditFile, Op::DeleteFile], rng);
    model.apply(rig, op)?;
    // Past the end, the renewal's retries (30 s at most apart) find it expired.
    let said = rig.wait_for_log(
        "the node has no valid client certificate",
        lines,
        left + Duration::from_secs(60),
    );
    if said.is_none() {
        outcome.violations.push(format!(
            "cut off past the client certificate's end (in {left:?}), the agent never said it had no valid one"
        ));
    }
    ran_on(rig, &running_before, op, "while its certificate expired", outcome)?;
    rig.rt.block_on(rig.server.restore()).context("restore the API server")?;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let condition = certificate_condition(rig);
        if condition.as_ref().is_some_and(|(status, reason, message)| {
            status == "False"
                && reason == "CertificateReplacedAfterExpiry"
                && message.contains(&expired_at)
        }) {
            return Ok(());
        }
        if Instant::now() > deadline {
            outcome.violations.push(format!(
                "90 s after the server came back the Node's CertificateExpired condition is {condition:?}, not False/CertificateReplacedAfterExpiry saying it {expired_at}"
            ));
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// How long the agent's client certificate has left, and its end, from its `/status`.
fn client_certificate_end(rig: &Rig) -> anyhow::Result<(Duration, jiff::Timestamp)> {
    let (status, body) = rig.agent()?.get("/status");
    let status: serde_json::Value =
        serde_json::from_str(&body).with_context(|| format!("GET /status: {status} {body}"))?;
    let certificates = status["certificates"].as_array().cloned().unwrap_or_default();
    let client = certificates
        .iter()
        .find(|c| c["name"] == "client")
        .context("/status shows no client certificate")?;
    let not_after: jiff::Timestamp = client["notAfter"]
        .as_str()
        .context("the client certificate has no notAfter")?
        .parse()
        .context("the client certificate's notAfter")?;
    let left = not_after.duration_since(jiff::Timestamp::now());
    Ok((Duration::try_from(left).unwrap_or(Duration::ZERO), not_after))
}

/// The Node's `CertificateExpired` condition as the API server has it: (status, reason,
/// message).
fn certificate_condition(rig: &Rig) -> Option<(String, String, String)> {
    let node = rig.server.get("nodes", None, super::rig::NODE).ok()?;
    let conditions = node.pointer("/status/conditions")?.as_array()?;
    let condition = conditions.iter().find(|c| c["type"] == "CertificateExpired")?;
    Some((
        condition["status"].as_str()?.to_owned(),
        condition["reason"].as_str().unwrap_or_default().to_owned(),
        condition["message"].as_str().unwrap_or_default().to_owned(),
    ))
}

/// A reboot with no network: every pod must come back from the state dir with the UID
/// it had, before the API server is reachable again.
fn offline_reboot(rig: &mut Rig, model: &Model, outcome: &mut Outcome) -> anyhow::Result<()> {
    // From a settled rig: a pod the trial's churn just created may still wait for its API
    // objects, which it cannot get offline.
    let (unsettled, _) = super::super::settle(rig, model, true);
    if !unsettled.is_empty() {
        outcome.notes.push(format!("rebooted before the rig settled: {unsettled:?}"));
    }
    let uids = pod_uids(rig)?;
    rig.rt.block_on(rig.server.cut());
    rig.reboot()?;
    rig.start()?;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let now = pod_uids(rig).unwrap_or_default();
        let back = model.desired_names().iter().all(|name| {
            now.get(name).is_some_and(|(uid, phase)| {
                phase == "Running" && uids.get(name).is_none_or(|(before, _)| before == uid)
            })
        });
        if back {
            break;
        }
        if Instant::now() > deadline {
            outcome.violations.push(format!(
                "offline after the reboot, the pods did not all come back with their UIDs: before {uids:?}, now {now:?}"
            ));
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    rig.rt.block_on(rig.server.restore()).context("restore the API server")?;
    Ok(())
}

/// Pod name → (UID, phase), from the agent's `/pods`.
fn pod_uids(rig: &Rig) -> anyhow::Result<std::collections::BTreeMap<String, (String, String)>> {
    let pods = rig.pods()?;
    Ok(pods
        .into_iter()
        .filter_map(|(name, p)| {
            let uid = p["metadata"]["uid"].as_str()?.to_owned();
            Some((name, (uid, p["status"]["phase"].as_str().unwrap_or_default().to_owned())))
        })
        .collect())
}

/// Pod name → the container ID `/pods` reports running.
fn running_containers(rig: &Rig) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    let pods = rig.pods()?;
    Ok(pods
        .into_iter()
        .filter_map(|(name, p)| {
            let status = &p["status"]["containerStatuses"][0];
            status["state"]["running"].is_object().then_some(())?;
            Some((name, status["containerID"].as_str()?.to_owned()))
        })
        .collect())
}

/// The running containers once they stay the same for [`STEADY`]; `None` if they do not
/// within half a minute.
fn steady_containers(
    rig: &Rig,
) -> anyhow::Result<Option<std::collections::BTreeMap<String, String>>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = running_containers(rig)?;
    while Instant::now() < deadline {
        std::thread::sleep(STEADY);
        let now = running_containers(rig)?;
        if now == last {
            return Ok(Some(now));
        }
        last = now;
    }
    Ok(None)
}

/// Longer than a chaos pod's stop (its grace period is 2 s).
const STEADY: Duration = Duration::from_secs(3);

fn read_dir_files(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .filter_map(|e| {
            Some((e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).ok()?))
        })
        .collect()
}

/// The bytes an unprivileged writer can still put in the filesystem at `path`.
fn free_bytes(path: &std::path::Path) -> anyhow::Result<u64> {
    let stat = nix::sys::statvfs::statvfs(path).context("statvfs of the state dir")?;
    Ok(stat.blocks_available() * stat.fragment_size())
}
