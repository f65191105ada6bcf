//! `outpost validate FILE...`: lint manifests offline, as the file source would read them,
//! and as this node would admit their pods (A1: AppArmor, allowed unsafe sysctls; the
//! admission policy of `--source`, file unless given).

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use outpost_core::admission::{self, NodeFacts, Severity};
use outpost_core::manifest::{self, Origin};
use outpost_core::pod::{FullName, Source};
use outpost_core::source::file::is_manifest_name;

use crate::cli::AGENT_CONFIG;
use crate::cli::ValidateArgs;
use crate::config::{self, Config, Settings};
use crate::source::file::read_manifest;
use crate::source::problems::located;

/// What validation found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub files: usize,
    pub pods: usize,
    pub invalid_files: usize,
    pub warnings: usize,
}

/// This host, as admission sees it: AppArmor from the kernel, the allowed unsafe sysctls
/// from the flags over the agent's config file, the admission policy from the file.
pub fn node_facts(args: &ValidateArgs) -> Result<NodeFacts, config::Error> {
    let config_file = args
        .config
        .clone()
        .or_else(|| Path::new(AGENT_CONFIG).is_file().then(|| AGENT_CONFIG.into()));
    let config = Config::resolve(Settings {
        config: config_file,
        // The node name is not needed: spare the hostname lookup.
        node_name: Some("-".to_owned()),
        allowed_unsafe_sysctls: args.allowed_unsafe_sysctls.clone(),
        ..Settings::default()
    })?;
    Ok(NodeFacts {
        apparmor_enabled: crate::host::apparmor_enabled(),
        selinux_enabled: crate::host::selinux_enabled(),
        allowed_unsafe_sysctls: config.pods.allowed_unsafe_sysctls,
        policy: config.pods.admission_policy,
        cluster_dns: !config.pods.dns.cluster_dns.is_empty(),
    })
}

/// `--source`'s value as a source (its names are [`Source::as_str`]'s).
pub fn source(name: &str) -> Source {
    match name {
        "url" => Source::Url,
        "push" => Source::Push,
        "api" => Source::Api,
        _ => Source::File,
    }
}

/// Validates every file (directories: their manifests, S10), writing one
/// `file:line:col: message` line per problem or warning to `out`. Each pod is also
/// reviewed against `facts`, as a pod of `source`: what this node would refuse makes its
/// file invalid.
pub fn validate(
    paths: &[PathBuf],
    node_name: &str,
    facts: &NodeFacts,
    source: Source,
    out: &mut impl Write,
) -> io::Result<Summary> {
    let mut summary = Summary::default();
    let mut owners: HashMap<FullName, PathBuf> = HashMap::new();
    let (files, unlisted) = expand(paths, out)?;
    summary.invalid_files += unlisted;
    for file in files {
        summary.files += 1;
        let bytes = match read_manifest(&file) {
            Ok(bytes) => bytes,
            Err(e) => {
                summary.invalid_files += 1;
                writeln!(out, "{}: cannot read: {e}", file.display())?;
                continue;
            }
        };
        match manifest::decode_with_warnings(&bytes, Origin::File(&file), node_name) {
            Ok(manifest::Decoded { pods, warnings }) => {
                summary.pods += pods.len();
                summary.warnings += warnings.len();
                for warning in &warnings {
                    writeln!(out, "{}", located(&file.display(), warning.position, warning))?;
                }
                let mut refused = false;
                for pod in &pods {
                    let name = FullName::of(pod);
                    // The manifest alone passed: what is refused now is this node's doing.
                    for finding in admission::review(pod, facts, source) {
                        if finding.severity == Severity::Refused {
                            refused = true;
                            writeln!(
                                out,
                                "{}: pod {name}: {}: {} (on this node)",
                                file.display(),
                                finding.reason,
                                finding.message
                            )?;
                        }
                    }
                    if let Some(first) = owners.get(&name) {
                        summary.warnings += 1;
                        writeln!(
                            out,
                            "{}: warning: pod {name} is also defined in {}; only the first seen runs (M11)",
                            file.display(),
                            first.display()
                        )?;
                    } else {
                        owners.insert(name, file.clone());
                    }
                }
                summary.invalid_files += usize::from(refused);
            }
            Err(errors) => {
                summary.invalid_files += 1;
                for e in &errors.0 {
                    writeln!(out, "{}", located(&file.display(), e.position(), e))?;
                }
            }
        }
    }
    Ok(summary)
}

/// Files as given; directories replaced by their manifest files in name order. Also
/// returns how many directories could not be listed.
fn expand(paths: &[PathBuf], out: &mut impl Write) -> io::Result<(Vec<PathBuf>, usize)> {
    let mut files = Vec::new();
    let mut unlisted = 0;
    for path in paths {
        if !path.is_dir() {
            files.push(path.clone());
            continue;
        }
        match fs::read_dir(path) {
            Ok(entries) => {
                let mut names: Vec<_> = entries
                    .flatten()
                    .map(|e| e.file_name())
                    .filter(|n| is_manifest_name(n))
                    .collect();
                names.sort();
                files.extend(names.into_iter().map(|n| path.join(n)));
            }
            Err(e) => {
                unlisted += 1;
                writeln!(out, "{}: cannot list directory: {e}", path.display())?;
            }
        }
    }
    Ok((files, unlisted))
}

#[cfg(test)]
mod tests;
