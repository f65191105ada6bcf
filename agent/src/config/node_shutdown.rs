//! Graceful node shutdown's settings (J3), KubeletConfiguration's: `shutdownGracePeriod`,
//! `shutdownGracePeriodCriticalPods` (flags too) and `shutdownGracePeriodByPodPriority`
//! (the file only), resolved into the priority groups a shutdown stops in turn.

use std::time::Duration;

use outpost_core::node_shutdown::{self, PriorityGroup};
use serde::Deserialize;

/// One entry of `shutdownGracePeriodByPodPriority`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PriorityGroupSetting {
    pub priority: i32,
    pub shutdown_grace_period_seconds: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{field} {value:?}: expected a duration such as \"30s\" or \"2m\" (0s: off)")]
    Duration { field: &'static str, value: String },
    #[error(
        "shutdownGracePeriodByPodPriority: priority {priority} has shutdownGracePeriodSeconds \
         {seconds}; give it 0 or more seconds"
    )]
    NegativeSeconds { priority: i32, seconds: i64 },
    #[error(transparent)]
    Groups(#[from] node_shutdown::Error),
}

/// The priority groups of the given settings; empty (graceful node shutdown off) when
/// none gives any time, as kubelet.
pub fn resolve(
    grace_period: Option<String>,
    critical: Option<String>,
    by_priority: Option<Vec<PriorityGroupSetting>>,
) -> Result<Vec<PriorityGroup>, Error> {
    let duration = |field, raw: Option<String>| match raw {
        None => Ok(Duration::ZERO),
        Some(raw) => {
            outpost_core::duration::parse(&raw).ok_or(Error::Duration { field, value: raw })
        }
    };
    let grace_period = duration("shutdownGracePeriod", grace_period)?;
    let critical = duration("shutdownGracePeriodCriticalPods", critical)?;
    let by_priority = by_priority
        .unwrap_or_default()
        .into_iter()
        .map(|g| match u64::try_from(g.shutdown_grace_period_seconds) {
            Ok(seconds) => {
                Ok(PriorityGroup { priority: g.priority, grace: Duration::from_secs(seconds) })
            }
            Err(_) => Err(Error::NegativeSeconds {
                priority: g.priority,
                seconds: g.shutdown_grace_period_seconds,
            }),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(node_shutdown::priority_groups(grace_period, critical, &by_priority)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(priority: i32, seconds: i64) -> PriorityGroupSetting {
        PriorityGroupSetting { priority, shutdown_grace_period_seconds: seconds }
    }

    #[test]
    fn j3_absent_or_zero_is_off() {
        assert!(resolve(None, None, None).unwrap().is_empty());
        assert!(resolve(Some("0s".into()), Some("0s".into()), None).unwrap().is_empty());
        assert!(resolve(None, None, Some(vec![])).unwrap().is_empty());
    }

    #[test]
    fn j3_two_settings_resolve_to_two_groups() {
        let groups = resolve(Some("30s".into()), Some("10s".into()), None).unwrap();
        let graces: Vec<(i32, u64)> =
            groups.iter().map(|g| (g.priority, g.grace.as_secs())).collect();
        assert_eq!(graces, [(0, 20), (2_000_000_000, 10)]);
    }

    #[test]
    fn j3_by_priority_resolves_sorted() {
        let given = vec![setting(100_000, 120), setting(0, 30)];
        let groups = resolve(None, None, Some(given)).unwrap();
        let graces: Vec<(i32, u64)> =
            groups.iter().map(|g| (g.priority, g.grace.as_secs())).collect();
        assert_eq!(graces, [(0, 30), (100_000, 120)]);
    }

    #[test]
    fn j3_bad_settings_say_which() {
        let err = resolve(Some("soon".into()), None, None).unwrap_err();
        assert!(err.to_string().contains("shutdownGracePeriod \"soon\""), "{err}");
        let err = resolve(None, None, Some(vec![setting(5, -1)])).unwrap_err();
        assert!(matches!(err, Error::NegativeSeconds { priority: 5, seconds: -1 }), "{err}");
        let err = resolve(Some("10s".into()), Some("20s".into()), None).unwrap_err();
        assert!(matches!(err, Error::Groups(node_shutdown::Error::CriticalExceedsTotal { .. })));
        let err = resolve(Some("10s".into()), None, Some(vec![setting(0, 5)])).unwrap_err();
        assert!(matches!(err, Error::Groups(node_shutdown::Error::BothForms)));
    }
}
