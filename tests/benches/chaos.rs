//! Chaos trials (`cargo xtask chaos [--trials N] [--seed S] [--quick] [--fault NAME]
//! [--shim-grouping pod|node]`): one real agent (managed containerd, pod network, test
//! API server) under a churn of static and API pods, hurt once per trial — `kill -9` of
//! the agent mid-CNI, mid-create, mid-stop or mid-checkpoint, `kill -9` of containerd
//! (also mid-start) or of a shim, a flapping API server, a full state dir, an offline
//! reboot, a cut that outlasts the node's client certificate, storms of refused writes
//! (403, 429, 503), a device plugin killed mid-`Allocate`, back with new device IDs, hung
//! on `ListAndWatch` or with its socket deleted (`devices`), the agent's wall clock at
//! 1970, 90 days ahead or a day back until NTP sets it (libfaketime) — and checked once
//! the trial settles (`check`). The agent is the node to the server's Node authorizer and
//! NodeRestriction (K5): a refusal is a violation, unless it is a read or a token for a
//! pod the churn deleted (a note: a real server refuses those too).
//!
//! Writes `target/chaos/report.json` (trials, faults, violations, time to settle) and
//! exits non-zero when an invariant is broken. The agent's log goes to stderr.

mod chaos {
    pub mod check;
    pub mod churn;
    pub mod devices;
    pub mod faults;
    pub mod rig;
}

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use chaos::check;
use chaos::churn::Model;
use chaos::faults::{self, Fault};
use chaos::rig::Rig;
use outpost_tests::apiserver::STORM_REFUSAL;

/// How long a trial may take to settle before what is still wrong counts as violations.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug)]
struct Options {
    trials: usize,
    seed: u64,
    /// The API server flaps for this long (a minute in a full run).
    flap: Duration,
    /// Only the faults whose name contains this (`--fault reboot`).
    only: Option<String>,
    /// The agent's `--shim-grouping` (its default when not given).
    shim_grouping: Option<String>,
}

impl Options {
    fn parse() -> anyhow::Result<Options> {
        let mut options = Options {
            trials: 100,
            seed: fastrand::u64(..),
            flap: Duration::from_secs(60),
            only: None,
            shim_grouping: None,
        };
        let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
        while let Some(arg) = args.next() {
            let mut value =
                |name: &str| args.next().with_context(|| format!("{name} needs a value"));
            match arg.as_str() {
                "--trials" => options.trials = value("--trials")?.parse()?,
                "--seed" => options.seed = value("--seed")?.parse()?,
                "--quick" => options.flap = Duration::from_secs(10),
                "--fault" => options.only = Some(value("--fault")?),
                "--shim-grouping" => options.shim_grouping = Some(value("--shim-grouping")?),
                other => bail!(
                    "unknown argument {other:?}; usage: chaos [--trials N] [--seed S] [--quick] [--fault NAME] [--shim-grouping pod|node]"
                ),
            }
        }
        Ok(options)
    }
}

/// One trial's record in the report.
#[derive(Debug, serde::Serialize)]
struct Trial {
    trial: usize,
    fault: String,
    ops: usize,
    settle_ms: Option<u128>,
    violations: Vec<String>,
    notes: Vec<String>,
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("chaos: error: {error:#}");
            println!("chaos: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<bool> {
    let options = Options::parse()?;
    let grouping = options.shim_grouping.as_deref().unwrap_or("the agent's default");
    println!("chaos: {} trials, seed {}, shim grouping {grouping}", options.trials, options.seed);
    let mut rng = fastrand::Rng::with_seed(options.seed);
    let mut rig = Rig::new(options.shim_grouping.clone())?;
    let mut model = Model::default();
    rig.start()?;
    for _ in 0..3 {
        let op = model.pick(&mut rng);
        model.apply(&rig, op)?;
    }
    let first = settle(&rig, &model, true);
    if first.1.is_none() {
        bail!("the rig never settled before the first fault: {:?}", first.0);
    }
    let faults: Vec<Fault> = faults::ALL
        .into_iter()
        .filter(|f| options.only.as_ref().is_none_or(|only| f.name().contains(only.as_str())))
        .collect();
    if faults.is_empty() {
        bail!("no fault's name contains {:?}", options.only);
    }
    let mut trials = Vec::with_capacity(options.trials);
    for trial in 0..options.trials {
        let fault = faults[trial % faults.len()];
        let record = one_trial(&mut rig, &mut model, fault, &mut rng, &options)
            .with_context(|| format!("trial {trial} ({})", fault.name()))?;
        println!(
            "chaos: trial {trial:3} {:40} settled in {:>6} ms, {} violations",
            record.fault,
            record.settle_ms.map_or("-".into(), |ms| ms.to_string()),
            record.violations.len()
        );
        for violation in &record.violations {
            println!("chaos:     violation: {violation}");
        }
        // A fault that did not land where it was aimed (its trigger never logged).
        for note in &record.notes {
            println!("chaos:     note: {note}");
        }
        trials.push(Trial { trial, ..record });
    }
    drop(rig);
    let report = report(&options, &trials);
    let path = report_path();
    std::fs::create_dir_all(path.parent().unwrap_or(&path))?;
    std::fs::write(&path, serde_json::to_vec_pretty(&report)?)?;
    let violations = report["violations"].as_u64().unwrap_or(0);
    println!(
        "chaos: {} trials, {violations} invariant violations, settle p50 {} ms p99 {} ms; report {}",
        trials.len(),
        report["settle_ms"]["p50"],
        report["settle_ms"]["p99"],
        path.display()
    );
    let leftovers = outpost_leaks::Scope::machine(None).inventory();
    let ours: Vec<_> = leftovers
        .iter()
        .filter(|l| l.to_string().contains("chaos") || l.to_string().contains("otbc"))
        .collect();
    for leftover in &ours {
        println!("chaos: left after the run: {leftover}");
    }
    Ok(violations == 0 && ours.is_empty())
}

fn one_trial(
    rig: &mut Rig,
    model: &mut Model,
    fault: Fault,
    rng: &mut fastrand::Rng,
    options: &Options,
) -> anyhow::Result<Trial> {
    let ops = rng.usize(1..=3);
    for _ in 0..ops {
        let op = model.pick(rng);
        model.apply(rig, op)?;
        std::thread::sleep(Duration::from_millis(rng.u64(0..500)));
    }
    let outcome = faults::inject(rig, model, fault, rng, options.flap)?;
    let (mut violations, settle) = settle(rig, model, true);
    violations.extend(outcome.violations);
    violations.extend(faults::after_settle(rig, model, fault));
    let mut notes = outcome.notes;
    // K5: what the server's Node authorizer and NodeRestriction refused the node, but
    // for a storm's own 403s.
    let mut stormed = 0;
    for refusal in rig.server.take_refusals() {
        if refusal.message.ends_with(STORM_REFUSAL) {
            stormed += 1;
        } else if is_for_a_pod_gone(&refusal) {
            notes.push(format!("refused while its pod was going: {refusal}"));
        } else {
            violations.push(format!("refused: {refusal}"));
        }
    }
    if stormed > 0 {
        notes.push(format!("{stormed} writes refused by the storm's authorizer"));
    }
    Ok(Trial {
        trial: 0,
        fault: fault.name(),
        ops,
        settle_ms: settle.map(|d| d.as_millis()),
        violations,
        notes,
    })
}

/// A read of a ConfigMap or Secret, or a token request, for a pod that the churn deleted
/// while the agent was cut off or had not heard of it yet: a real server refuses it too
/// (the pod is no longer bound to the node), until the agent drops the pod. Any other
/// refusal breaks K5.
fn is_for_a_pod_gone(refusal: &outpost_tests::apiserver::Refusal) -> bool {
    let unrelated = refusal.message.contains("no relationship found");
    match refusal.resource.as_str() {
        "configmaps" | "secrets" => unrelated && refusal.verb != "create",
        "serviceaccounts/token" => {
            unrelated
                || refusal.message.contains("not found")
                || refusal.message.contains("does not match the UID in record")
        }
        _ => false,
    }
}

/// Polls the invariants until they hold (the time it took) or [`SETTLE_TIMEOUT`] passes
/// (what is still broken).
pub fn settle(rig: &Rig, model: &Model, api_up: bool) -> (Vec<String>, Option<Duration>) {
    let start = Instant::now();
    loop {
        let violations = check::violations(rig, model, api_up);
        if violations.is_empty() {
            return (violations, Some(start.elapsed()));
        }
        if start.elapsed() > SETTLE_TIMEOUT {
            return (violations, None);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn report(options: &Options, trials: &[Trial]) -> serde_json::Value {
    let mut settled: Vec<u128> = trials.iter().filter_map(|t| t.settle_ms).collect();
    settled.sort_unstable();
    let at = |q: f64| {
        (!settled.is_empty()).then(|| settled[((settled.len() - 1) as f64 * q).round() as usize])
    };
    let mut faults: BTreeMap<&str, usize> = BTreeMap::new();
    for trial in trials {
        *faults.entry(trial.fault.as_str()).or_default() += 1;
    }
    serde_json::json!({
        "seed": options.seed,
        "shim_grouping": options.shim_grouping,
        "trials": trials.len(),
        "faults": faults,
        "violations": trials.iter().map(|t| t.violations.len()).sum::<usize>(),
        "unsettled": trials.iter().filter(|t| t.settle_ms.is_none()).count(),
        "settle_ms": { "p50": at(0.5), "p99": at(0.99), "max": settled.last() },
        "detail": trials,
    })
}

/// `target/chaos/report.json`, under `CARGO_TARGET_DIR` when set.
fn report_path() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("chaos").join("report.json")
}
