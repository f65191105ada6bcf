//! `outpost validate FILE...`: lint manifests offline, as the file source would read them.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::path::PathBuf;

use outpost_core::manifest::{self, Origin};
use outpost_core::pod::FullName;

use crate::source::file::{diagnostic, is_manifest_name, read_manifest};

/// What validation found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub files: usize,
    pub pods: usize,
    pub invalid_files: usize,
}

/// Validates every file (directories: their manifests, S10), writing one
/// `file:line:col: message` line per problem to `out`.
pub fn validate(paths: &[PathBuf], node_name: &str, out: &mut impl Write) -> io::Result<Summary> {
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
        match manifest::decode(&bytes, Origin::File(&file), node_name) {
            Ok(pods) => {
                summary.pods += pods.len();
                for pod in &pods {
                    let name = FullName::of(pod);
                    if let Some(first) = owners.get(&name) {
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
            }
            Err(errors) => {
                summary.invalid_files += 1;
                for e in &errors.0 {
                    writeln!(out, "{}", diagnostic(&file, e))?;
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
