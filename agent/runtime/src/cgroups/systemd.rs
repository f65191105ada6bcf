//! The pods' slices under `--cgroup-driver systemd`: systemd owns the cgroups, so each
//! slice is given its limits as unit properties (`systemctl set-property --runtime`, as
//! kubelet's systemd driver sets them over D-Bus: `CPUShares`/`CPUWeight`, `CPUQuota`,
//! `MemoryLimit`/`MemoryMax`, `TasksMax`), started (`systemctl start`), and stopped to
//! remove it. runc puts each container in a scope of its pod's slice (runc's systemd
//! driver, set in the container's runtime options). [`Systemctl`] is the seam the tests
//! record through.

use std::process::Command;

use outpost_core::resource_config::{ResourceConfig, shares_to_weight};

use super::tree::Error;

/// Runs `systemctl` with arguments.
pub trait Systemctl: std::fmt::Debug + Send + Sync {
    /// `Err`: it could not run ([`Error::SystemctlRun`]), or what it said on its standard
    /// error ([`Error::Systemctl`]).
    fn run(&self, args: &[String]) -> Result<(), Error>;
}

/// The real `systemctl`.
#[derive(Debug, Default)]
pub struct SystemctlCommand;

impl Systemctl for SystemctlCommand {
    fn run(&self, args: &[String]) -> Result<(), Error> {
        let out = Command::new("systemctl")
            .args(args)
            .output()
            .map_err(|source| Error::SystemctlRun { args: args.join(" "), source })?;
        if out.status.success() {
            Ok(())
        } else {
            let message = String::from_utf8_lossy(&out.stderr).trim().to_owned();
            Err(Error::Systemctl { args: args.join(" "), message })
        }
    }
}

/// The unit properties that set `config` (v1 names under cgroup v1, as runc's systemd
/// driver uses them).
pub fn properties(config: &ResourceConfig, v2: bool) -> Vec<String> {
    let period_us = config.cpu_period.max(1);
    let quota = config.cpu_quota.map_or_else(String::new, |quota| {
        // Percent of one CPU, rounded up to a whole percent as systemd takes it.
        let percent = u64::try_from(quota).unwrap_or(0).saturating_mul(100).div_ceil(period_us);
        format!("{percent}%")
    });
    let infinity =
        |limit: Option<i64>| limit.map_or_else(|| "infinity".to_owned(), |l| l.to_string());
    let (cpu, memory) = if v2 {
        (format!("CPUWeight={}", shares_to_weight(config.cpu_shares)), "MemoryMax")
    } else {
        (format!("CPUShares={}", config.cpu_shares), "MemoryLimit")
    };
    vec![
        cpu,
        format!("CPUQuotaPeriodSec={}ms", period_us / 1000),
        format!("CPUQuota={quota}"),
        format!("{memory}={}", infinity(config.memory_limit)),
        format!("TasksMax={}", infinity(config.pids_limit)),
    ]
}

/// Gives slice `unit` the properties of `config` (if any) and starts it (its parents
/// start with it).
pub fn ensure(
    systemctl: &dyn Systemctl,
    unit: &str,
    config: Option<&ResourceConfig>,
    v2: bool,
) -> Result<(), Error> {
    if let Some(config) = config {
        let mut args = vec!["set-property".to_owned(), "--runtime".to_owned(), unit.to_owned()];
        args.extend(properties(config, v2));
        call(systemctl, args)?;
    }
    call(systemctl, vec!["start".to_owned(), unit.to_owned()])
}

/// Stops slice `unit` (removing its cgroup); one that is not loaded is fine.
pub fn stop(systemctl: &dyn Systemctl, unit: &str) -> Result<(), Error> {
    match call(systemctl, vec!["stop".to_owned(), unit.to_owned()]) {
        Err(Error::Systemctl { message, .. }) if message.contains("not loaded") => Ok(()),
        other => other,
    }
}

fn call(systemctl: &dyn Systemctl, args: Vec<String>) -> Result<(), Error> {
    systemctl.run(&args)
}

/// A [`Systemctl`] that records its calls and fails those whose arguments contain a
/// given text.
#[cfg(test)]
#[derive(Debug, Default)]
pub struct Recording {
    pub calls: std::sync::Mutex<Vec<String>>,
    pub fail: Option<(String, String)>,
}

#[cfg(test)]
impl Systemctl for Recording {
    fn run(&self, args: &[String]) -> Result<(), Error> {
        let call = args.join(" ");
        if let Some((needle, message)) = &self.fail
            && call.contains(needle.as_str())
        {
            return Err(Error::Systemctl { args: call, message: message.clone() });
        }
        self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(call);
        Ok(())
    }
}

#[cfg(test)]
impl Recording {
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q2_limits_are_kubelets_unit_properties() {
        let config = ResourceConfig {
            cpu_shares: 204,
            cpu_quota: Some(20_000),
            cpu_period: 100_000,
            memory_limit: Some(64 << 20),
            pids_limit: Some(100),
        };
        assert_eq!(
            properties(&config, false),
            [
                "CPUShares=204",
                "CPUQuotaPeriodSec=100ms",
                "CPUQuota=20%",
                "MemoryLimit=67108864",
                "TasksMax=100"
            ]
        );
        let unlimited = ResourceConfig::unlimited(1024);
        assert_eq!(
            properties(&unlimited, true),
            [
                "CPUWeight=39",
                "CPUQuotaPeriodSec=100ms",
                "CPUQuota=",
                "MemoryMax=infinity",
                "TasksMax=infinity"
            ]
        );
        let small = ResourceConfig { cpu_quota: Some(1_000), ..unlimited };
        assert_eq!(properties(&small, true)[2], "CPUQuota=1%");
        let odd = ResourceConfig { cpu_quota: Some(12_345), ..unlimited };
        assert_eq!(properties(&odd, true)[2], "CPUQuota=13%", "rounded up, never below the quota");
    }

    #[test]
    fn slices_are_set_then_started_and_stopped_to_go() {
        let systemctl = Recording::default();
        ensure(&systemctl, "kubepods.slice", Some(&ResourceConfig::unlimited(2)), false).unwrap();
        ensure(&systemctl, "kubepods-besteffort.slice", None, false).unwrap();
        stop(&systemctl, "kubepods-podu.slice").unwrap();
        assert_eq!(
            systemctl.take(),
            [
                "set-property --runtime kubepods.slice CPUShares=2 CPUQuotaPeriodSec=100ms \
                 CPUQuota= MemoryLimit=infinity TasksMax=infinity",
                "start kubepods.slice",
                "start kubepods-besteffort.slice",
                "stop kubepods-podu.slice",
            ]
        );
        let gone = Recording {
            fail: Some(("stop".into(), "Unit kubepods-podx.slice not loaded.".into())),
            ..Recording::default()
        };
        stop(&gone, "kubepods-podx.slice").unwrap();
        let broken = Recording {
            fail: Some(("start".into(), "Access denied".into())),
            ..Recording::default()
        };
        let e = ensure(&broken, "kubepods.slice", None, false).unwrap_err().to_string();
        assert_eq!(e, "systemctl start kubepods.slice: Access denied");
    }
}
