//! `seLinuxOptions`, as containerd's CRI takes them: the effective options (the
//! container's, else the pod's, as kubelet's `DetermineEffectiveSecurityContext` picks
//! them) become the process's label only where the host has SELinux enabled, which admission
//! refuses (`outpost_core::admission`). Where it is off, go-selinux gives no label, so the
//! spec has neither `process.selinuxLabel` nor `linux.mountLabel`; containerd still checks
//! the level's format first, and so does this.

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::error::{Error, Result};
use crate::subject::Subject;

/// The pod's and the container's levels, each as containerd checks it when it creates the
/// sandbox and the container.
pub(super) fn check(pod: &Pod, container: &Container, at: &Subject) -> Result<()> {
    let pod_level = pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.as_ref())
        .and_then(|c| c.se_linux_options.as_ref())
        .and_then(|o| o.level.as_deref());
    let container_level = container
        .security_context
        .as_ref()
        .and_then(|c| c.se_linux_options.as_ref())
        .and_then(|o| o.level.as_deref());
    for (field, level) in [
        ("spec.securityContext.seLinuxOptions.level", pod_level),
        ("securityContext.seLinuxOptions.level", container_level),
    ] {
        if let Some(level) = level.filter(|l| !level_is_valid(l)) {
            return Err(Error::SelinuxLevel { at: at.clone(), field, level: level.to_owned() });
        }
    }
    Ok(())
}

/// containerd's level grammar: empty, or `s<d>` with an optional `-s<d>` range, then
/// optionally `:` and a comma-separated list of categories `c<1-4 digits>`, each alone or
/// a `.c<1-4 digits>` range.
pub(super) fn level_is_valid(level: &str) -> bool {
    if level.is_empty() {
        return true;
    }
    let (sensitivity, categories) = match level.split_once(':') {
        Some((s, c)) => (s, Some(c)),
        None => (level, None),
    };
    let one_sensitivity = |s: &str| {
        s.strip_prefix('s').is_some_and(|d| d.len() == 1 && d.bytes().all(|b| b.is_ascii_digit()))
    };
    let sensitivity_ok = match sensitivity.split_once('-') {
        Some((low, high)) => one_sensitivity(low) && one_sensitivity(high),
        None => one_sensitivity(sensitivity),
    };
    let category = |c: &str| {
        c.strip_prefix('c')
            .is_some_and(|d| (1..=4).contains(&d.len()) && d.bytes().all(|b| b.is_ascii_digit()))
    };
    let categories_ok = categories.is_none_or(|list| {
        list.split(',').all(|item| match item.split_once('.') {
            Some((low, high)) => category(low) && category(high),
            None => category(item),
        })
    });
    sensitivity_ok && categories_ok
}

#[cfg(test)]
mod tests {
    use super::level_is_valid;
    use proptest::prelude::*;

    #[test]
    fn levels_containerd_accepts_and_refuses() {
        for good in ["", "s0", "s0-s1", "s0:c1", "s0:c123,c456", "s0-s9:c0.c1023", "s1:c1,c2.c3"] {
            assert!(level_is_valid(good), "{good}");
        }
        for bad in [
            "s",
            "s10",
            "t0",
            "s0:",
            "s0:c",
            "s0:c12345",
            "s0:c1,",
            "s0:c1.c2.c3",
            "s0-",
            ":c1",
            "s0:c1;",
        ] {
            assert!(!level_is_valid(bad), "{bad}");
        }
    }

    proptest! {
        /// Every level built by the grammar is accepted.
        #[test]
        fn levels_of_the_grammar_are_valid(
            low in 0u8..10, high in proptest::option::of(0u8..10),
            cats in proptest::collection::vec((0u16..10000, proptest::option::of(0u16..10000)), 0..5),
        ) {
            let mut level = format!("s{low}");
            if let Some(high) = high { level.push_str(&format!("-s{high}")); }
            if !cats.is_empty() {
                let items: Vec<String> = cats.iter().map(|(a, b)| match b {
                    Some(b) => format!("c{a}.c{b}"),
                    None => format!("c{a}"),
                }).collect();
                level.push(':');
                level.push_str(&items.join(","));
            }
            prop_assert!(level_is_valid(&level), "{}", level);
        }
    }
}
