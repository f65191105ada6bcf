//! Manifests a source currently rejects or warns about, each with its first problem:
//! what `/readyz?verbose` and `outpost status` list under the source. A source sends its
//! whole list again ([`super::SourceEvent::Problems`]) whenever it changes; a manifest
//! fixed or removed leaves it. No IO here.

use std::fmt;

use crate::manifest;
use serde::{Deserialize, Serialize};

/// Whether a manifest's pods were refused or only warned about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Severity {
    /// The manifest is not used; the last good pods it had (if any) keep running.
    Rejected,
    /// The manifest's pods run, but something in it is not honoured as written.
    Warned,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Rejected => "rejected",
            Severity::Warned => "warned",
        })
    }
}

/// One manifest with problems.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestProblem {
    /// The file's path, the URL (password hidden) or the push key.
    pub manifest: String,
    pub severity: Severity,
    /// The first problem, `<manifest>:L:C: message` (`<manifest>: message` when the
    /// position is unknown), on one line.
    pub first: String,
    /// How many problems of that severity the manifest has.
    pub count: usize,
}

impl ManifestProblem {
    /// A rejected manifest, from its report lines (the first one is shown).
    pub fn rejected(manifest: &str, lines: &[String]) -> Option<ManifestProblem> {
        ManifestProblem::of(manifest, Severity::Rejected, lines)
    }

    /// A manifest with warnings (none: no problem).
    pub fn warned(manifest: &str, lines: &[String]) -> Option<ManifestProblem> {
        ManifestProblem::of(manifest, Severity::Warned, lines)
    }

    fn of(manifest: &str, severity: Severity, lines: &[String]) -> Option<ManifestProblem> {
        let first = lines.first()?;
        Some(ManifestProblem {
            manifest: manifest.to_owned(),
            severity,
            first: one_line(first),
            count: lines.len(),
        })
    }
}

impl fmt::Display for ManifestProblem {
    /// The first problem, and how many more there are.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.first)?;
        match self.count {
            0 | 1 => Ok(()),
            n => write!(f, " (+{} more)", n - 1),
        }
    }
}

/// `1 manifest rejected, 2 warned`: how many manifests of `problems` are in each
/// severity; `None` with no problem.
pub fn summary(problems: &[ManifestProblem]) -> Option<String> {
    let rejected = problems.iter().filter(|p| p.severity == Severity::Rejected).count();
    let warned = problems.len() - rejected;
    let noun = |n: usize| if n == 1 { "manifest" } else { "manifests" };
    match (rejected, warned) {
        (0, 0) => None,
        (r, 0) => Some(format!("{r} {} rejected", noun(r))),
        (0, w) => Some(format!("{w} {} with warnings", noun(w))),
        (r, w) => Some(format!("{r} {} rejected, {w} with warnings", noun(r))),
    }
}

/// `<manifest>:` before a message that starts with its `L:C: ` when `position` is
/// known, else `<manifest>: `, as compilers print a file's problems. Every source and
/// `outpost validate` report a manifest's problems through it.
pub fn located(
    manifest: &dyn fmt::Display,
    position: Option<(usize, usize)>,
    message: &dyn fmt::Display,
) -> String {
    match position {
        Some(_) => format!("{manifest}:{message}"),
        None => format!("{manifest}: {message}"),
    }
}

/// Every warning of a decoded manifest, located in `manifest`.
pub fn warning_lines(manifest: &dyn fmt::Display, warnings: &[manifest::Warning]) -> Vec<String> {
    warnings.iter().map(|w| located(manifest, w.position, w)).collect()
}

/// Every error of a rejected manifest, located in `manifest`.
pub fn error_lines(manifest: &dyn fmt::Display, errors: &manifest::Errors) -> Vec<String> {
    errors.0.iter().map(|e| located(manifest, e.position(), e)).collect()
}

/// A message on one line (a report line never holds a newline, but a parser's may).
fn one_line(text: &str) -> String {
    text.lines().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests;
