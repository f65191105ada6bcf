//! `admissionPolicy` (the config file only): what the pods of each source may do to the
//! host, over the defaults of [`outpost_core::admission::Policy`]:
//!
//! ```yaml
//! admissionPolicy:
//!   push:                       # also file, url, api
//!     privileged: false         # containers with securityContext.privileged: true
//!     hostNetwork: true
//!     hostPID: false
//!     hostIPC: false
//!     allowedHostPaths: [/var/log, /srv/data]   # hostPath prefixes; [/]: any
//! ```
//!
//! A source left out, or a setting left out of a source, keeps its default. Prefixes are
//! absolute paths, normalised here (`/var/log/` is `/var/log`).

use outpost_core::admission::policy::{self, Policy, SourcePolicy};
use outpost_core::pod::Source;
use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "{key}.allowedHostPaths: {path:?} is not an absolute path; write prefixes such as \
         /var/log (or / to allow any hostPath)"
    )]
    RelativeHostPath { key: String, path: String },
}

/// `admissionPolicy` as written: each source's settings, each optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicySettings {
    pub file: Option<SourceSettings>,
    pub url: Option<SourceSettings>,
    pub push: Option<SourceSettings>,
    pub api: Option<SourceSettings>,
}

/// One source's settings as written; `None`: the source's default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SourceSettings {
    pub privileged: Option<bool>,
    pub host_network: Option<bool>,
    #[serde(rename = "hostPID")]
    pub host_pid: Option<bool>,
    #[serde(rename = "hostIPC")]
    pub host_ipc: Option<bool>,
    pub allowed_host_paths: Option<Vec<String>>,
}

/// The policy: `given` over the defaults.
pub fn resolve(given: Option<PolicySettings>) -> Result<Policy, Error> {
    let given = given.unwrap_or_default();
    let defaults = Policy::default();
    Ok(Policy {
        file: over(Source::File, given.file, defaults.file)?,
        url: over(Source::Url, given.url, defaults.url)?,
        push: over(Source::Push, given.push, defaults.push)?,
        api: over(Source::Api, given.api, defaults.api)?,
    })
}

fn over(
    source: Source,
    given: Option<SourceSettings>,
    default: SourcePolicy,
) -> Result<SourcePolicy, Error> {
    let Some(given) = given else { return Ok(default) };
    let allowed_host_paths = match given.allowed_host_paths {
        None => default.allowed_host_paths,
        Some(paths) => paths
            .into_iter()
            .map(|path| {
                policy::normalize(&path).ok_or_else(|| Error::RelativeHostPath {
                    key: policy::config_key(source),
                    path,
                })
            })
            .collect::<Result<_, _>>()?,
    };
    Ok(SourcePolicy {
        privileged: given.privileged.unwrap_or(default.privileged),
        host_network: given.host_network.unwrap_or(default.host_network),
        host_pid: given.host_pid.unwrap_or(default.host_pid),
        host_ipc: given.host_ipc.unwrap_or(default.host_ipc),
        allowed_host_paths,
    })
}
