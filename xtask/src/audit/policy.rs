//! The dependency policy `cargo xtask audit` checks beside the advisories, the two checks
//! of cargo-deny's that fit this workspace (`licenses` and the `multiple-versions` part of
//! `bans`), written over `cargo metadata` with the `spdx` crate that cargo-deny uses:
//!
//! - **Licences.** Every locked package's SPDX expression must be satisfied by the
//!   permissive licences in [`ALLOWED`] (Outpost ships under Apache-2.0, statically
//!   linked). An expression that does not parse, a package without one, or one that the
//!   list cannot satisfy fails the audit, unless the package is a named [`EXCEPTIONS`]
//!   entry, and an exception holds only while no shipped binary builds the package.
//! - **Shipped.** The packages [`SHIPPED`] builds (`cargo xtask dist`'s two binaries)
//!   through normal and build dependencies, for the Linux targets Outpost is built for
//!   (`cargo metadata --filter-platform`: Windows- or UEFI-only crates are not built).
//! - **Duplicates.** A crate locked in two or more versions is compiled twice: each is
//!   printed as a warning with the versions, and whether the shipped binaries build two
//!   of them or only the tests and tools do. They are warnings, not failures: most come from an upstream crate that has
//!   not moved to the new major version yet.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

use serde_json::Value;
use spdx::{Expression, Licensee, ParseMode};

/// The licences any dependency may carry: permissive ones, compatible with distributing
/// a statically linked Apache-2.0 binary.
pub const ALLOWED: [&str; 12] = [
    "Apache-2.0",
    "Apache-2.0 WITH LLVM-exception",
    "MIT",
    "BSD-2-Clause",
    "BSD-3-Clause",
    "ISC",
    "Zlib",
    "0BSD",
    "Unlicense",
    "BSL-1.0",
    "Unicode-3.0",
    "CDLA-Permissive-2.0",
];

/// The packages whose binaries Outpost distributes (`cargo xtask dist`).
pub const SHIPPED: [&str; 2] = ["outpost", "outpost-container-log"];

/// The targets Outpost's binaries are built for (`cargo xtask dist`).
pub const TARGETS: [&str; 2] = ["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"];

/// Packages allowed a licence outside [`ALLOWED`], each with why; no shipped binary may
/// build them.
pub const EXCEPTIONS: [(&str, &str); 2] = [
    (
        "openmetrics-parser",
        "the tests parse the agent's /metrics with it to check the exposition format; \
         it is a dev-dependency of outpost-tests and in no shipped binary",
    ),
    (
        "libfuzzer-sys",
        "LLVM's libFuzzer (NCSA: a permissive BSD-style licence), linked only into the \
         fuzz programs of outpost-fuzz that CI's short fuzzing runs; in no shipped binary",
    ),
];

/// One locked package, as `cargo metadata` gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    pub id: String,
    pub name: String,
    pub version: String,
    pub license: Option<String>,
}

/// What the policy found in one workspace's metadata.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// How many packages were checked.
    pub packages: usize,
    /// Each package whose licence the policy does not allow: `name version: why`.
    pub licence_errors: Vec<String>,
    /// Exceptions that applied: `name version (licence): why`.
    pub excepted: Vec<String>,
    /// Each crate locked in several versions: name, versions, and whether a shipped
    /// binary builds more than one of them.
    pub duplicates: Vec<Duplicate>,
}

#[derive(Debug, PartialEq, Eq)]
pub struct Duplicate {
    pub name: String,
    pub versions: Vec<String>,
    /// Whether two or more of the versions are built into a shipped binary.
    pub shipped: bool,
}

/// The packages of `cargo metadata --format-version 1` output.
pub fn packages(metadata: &Value) -> Vec<Package> {
    let text = |package: &Value, key: &str| package[key].as_str().unwrap_or_default().to_owned();
    metadata["packages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|package| Package {
            id: text(package, "id"),
            name: text(package, "name"),
            version: text(package, "version"),
            license: package["license"].as_str().map(str::to_owned),
        })
        .collect()
}

/// The ids of the packages a shipped binary builds: those reached from the `roots`
/// packages through normal and build dependencies (dev-dependencies are the tests');
/// `packages` are the metadata's ([`packages`]).
pub fn shipped(metadata: &Value, packages: &[Package], roots: &[&str]) -> BTreeSet<String> {
    let mut edges: HashMap<&str, Vec<&str>> = HashMap::new();
    for node in metadata["resolve"]["nodes"].as_array().map(Vec::as_slice).unwrap_or_default() {
        let from = node["id"].as_str().unwrap_or_default();
        let deps = node["deps"].as_array().map(Vec::as_slice).unwrap_or_default();
        let shipped_deps = deps.iter().filter(|dep| {
            dep["dep_kinds"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|kind| kind["kind"].as_str() != Some("dev")))
        });
        edges.entry(from).or_default().extend(shipped_deps.filter_map(|dep| dep["pkg"].as_str()));
    }
    let members = metadata["workspace_members"].as_array().map(Vec::as_slice).unwrap_or_default();
    let members: BTreeSet<&str> = members.iter().filter_map(Value::as_str).collect();
    let mut next: Vec<&str> = packages
        .iter()
        .filter(|p| members.contains(p.id.as_str()) && roots.contains(&p.name.as_str()))
        .map(|p| p.id.as_str())
        .collect();
    let mut reached: BTreeSet<String> = BTreeSet::new();
    while let Some(id) = next.pop() {
        if reached.insert(id.to_owned()) {
            next.extend(edges.get(id).into_iter().flatten().copied());
        }
    }
    reached
}

/// Why `license` is not allowed, or `None` when [`ALLOWED`] satisfies it.
pub fn licence_problem(license: Option<&str>) -> Option<String> {
    let Some(license) = license else {
        return Some("no `license` in its manifest".to_owned());
    };
    // cargo's manifests still carry the old `MIT/Apache-2.0` form: lax parsing reads `/`
    // as OR.
    let expression = match Expression::parse_mode(license, ParseMode::LAX) {
        Ok(expression) => expression,
        Err(error) => return Some(format!("its licence {license:?} does not parse: {error}")),
    };
    let allowed: Vec<Licensee> =
        ALLOWED.iter().filter_map(|licence| Licensee::parse(licence).ok()).collect();
    match expression.evaluate_with_failures(|req| allowed.iter().any(|l| l.satisfies(req))) {
        Ok(()) => None,
        Err(failed) => {
            let terms: Vec<String> = failed.iter().map(|req| req.req.to_string()).collect();
            Some(format!("{license:?}: {} not in the allowed list", terms.join(", ")))
        }
    }
}

/// Checks the licence and duplicate policy over `cargo metadata` output, the binaries
/// being built from the `roots` packages ([`SHIPPED`]).
pub fn check(metadata: &Value, roots: &[&str]) -> Findings {
    let packages = packages(metadata);
    let shipped = shipped(metadata, &packages, roots);
    let mut findings = Findings { packages: packages.len(), ..Findings::default() };
    for package in &packages {
        let Some(problem) = licence_problem(package.license.as_deref()) else { continue };
        let exception = EXCEPTIONS.iter().find(|(name, _)| *name == package.name);
        let name = format!("{} {}", package.name, package.version);
        match exception {
            Some((_, why)) if !shipped.contains(&package.id) => findings
                .excepted
                .push(format!("{name} ({}): {why}", package.license.as_deref().unwrap_or("none"))),
            Some(_) => findings.licence_errors.push(format!(
                "{name}: {problem}; its exception holds while no shipped binary builds it, \
                 and one now does"
            )),
            None => findings.licence_errors.push(format!("{name}: {problem}")),
        }
    }
    let mut versions: BTreeMap<&str, Vec<&Package>> = BTreeMap::new();
    for package in &packages {
        versions.entry(&package.name).or_default().push(package);
    }
    for (name, locked) in versions.into_iter().filter(|(_, locked)| locked.len() > 1) {
        let mut listed: Vec<&Package> = locked.clone();
        listed.sort_by_key(|p| version_key(&p.version));
        let listed = listed.iter().map(|p| p.version.clone()).collect();
        let in_binaries = locked.iter().filter(|p| shipped.contains(&p.id)).count();
        findings.duplicates.push(Duplicate {
            name: name.to_owned(),
            versions: listed,
            shipped: in_binaries > 1,
        });
    }
    findings
}

/// `1.10.0` after `1.9.0`: the numeric parts of a version, then the text.
fn version_key(version: &str) -> (Vec<u64>, String) {
    let release = version.split(['-', '+']).next().unwrap_or_default();
    (release.split('.').map(|part| part.parse().unwrap_or(u64::MAX)).collect(), version.to_owned())
}

/// The findings as printed.
pub fn describe(findings: &Findings) -> String {
    let shipped = findings.duplicates.iter().filter(|d| d.shipped).count();
    let mut out = format!(
        "audit: licences: {} packages, {} not allowed, {} excepted; {} crates in several \
         versions ({shipped} of them twice in the shipped binaries)\n",
        findings.packages,
        findings.licence_errors.len(),
        findings.excepted.len(),
        findings.duplicates.len(),
    );
    for error in &findings.licence_errors {
        let _ = writeln!(out, "  error (licence): {error}");
    }
    for excepted in &findings.excepted {
        let _ = writeln!(out, "  excepted (licence): {excepted}");
    }
    for duplicate in &findings.duplicates {
        let built = if duplicate.shipped { "shipped binaries" } else { "tests and tools only" };
        let _ = writeln!(
            out,
            "  warning (duplicate): {} {} ({built})",
            duplicate.name,
            duplicate.versions.join(", ")
        );
    }
    out
}

#[cfg(test)]
mod tests;
