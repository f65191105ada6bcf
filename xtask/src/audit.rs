//! `cargo xtask audit`: checks the locked dependencies (`Cargo.lock` and `fuzz/Cargo.lock`)
//! against a copy of the RustSec advisory database, offline.
//!
//! The database is a directory of advisories (`crates/<name>/RUSTSEC-*.md`), by default
//! `../shared/advisory-db` beside the workspace root (`--db PATH` to use another). The
//! `rustsec` crate (no default features: no git, no network) loads it and matches each
//! locked package's version against each advisory's patched and unaffected ranges.
//!
//! A vulnerability that applies to a locked version fails the task. Informational
//! advisories (unmaintained, unsound, notices) are printed as warnings. Whether a locked
//! version was yanked is not checked: that needs the crates.io index, and the audit runs
//! offline.
//!
//! Then it checks the licence and duplicate policy ([`policy`]) over `cargo metadata`.
//!
//! It also fails when a lockfile brings ICU4X back: Outpost's host names are ASCII, and
//! `idna`'s Unicode back end is chosen by the locked version of `idna_adapter` (1.0.x has
//! none; 1.2.x, which a plain `cargo update` picks, pulls about twenty ICU4X crates).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use rustsec::advisory::Informational;
use rustsec::report::{Report, Settings};
use rustsec::{Database, Lockfile, Vulnerability, Warning};

mod policy;

/// The lockfiles checked, relative to the workspace root.
const LOCKFILES: [&str; 2] = ["Cargo.lock", "fuzz/Cargo.lock"];
/// The `idna_adapter` versions without a Unicode back end (ASCII host names only).
const ASCII_IDNA: &str = "~1.0";
/// The database copy, relative to the workspace root (CI's clone has `shared/` beside it).
const DEFAULT_DB: &str = "../shared/advisory-db";

/// `cargo xtask audit [--db PATH]`.
#[derive(Debug, PartialEq, Eq)]
pub struct Options {
    /// The advisory database's directory.
    pub db: PathBuf,
}

impl Options {
    pub fn parse(args: &[String]) -> anyhow::Result<Options> {
        let mut db = crate::project_root().join(DEFAULT_DB);
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--db" => {
                    let path = args.next().context("--db needs the database's directory")?;
                    db = PathBuf::from(path);
                }
                other => bail!("audit: unknown argument {other:?} (usage: audit [--db PATH])"),
            }
        }
        Ok(Options { db })
    }
}

pub fn run(options: &Options) -> anyhow::Result<()> {
    let db = Database::open(&options.db).with_context(|| {
        format!(
            "cannot load the advisory database from {} (a copy of RustSec's advisory-db; \
             pass its directory with --db)",
            options.db.display()
        )
    })?;
    let shown = options.db.canonicalize().unwrap_or_else(|_| options.db.clone());
    println!(
        "audit: {} advisories loaded from {} (yanked crates are not checked: that needs the \
         crates.io index, and the audit is offline)",
        db.iter().count(),
        shown.display()
    );
    let mut vulnerable = 0;
    let mut unicode = Vec::new();
    for lockfile in LOCKFILES {
        let audited = audit(&db, &crate::project_root().join(lockfile))?;
        print!("{}", describe(lockfile, &audited));
        vulnerable += audited.report.vulnerabilities.count;
        if let Some(version) = audited.unicode_idna {
            unicode.push(format!("{lockfile} locks idna_adapter {version}"));
        }
    }
    let findings = policy::check(&metadata()?, &policy::SHIPPED);
    print!("{}", policy::describe(&findings));
    if vulnerable > 0 {
        bail!("{vulnerable} vulnerable locked package(s): upgrade them (see above)");
    }
    if !findings.licence_errors.is_empty() {
        bail!(
            "{} package(s) with a licence the policy does not allow (see above): replace \
             them, or, for a test-only crate, add it to the exceptions in \
             xtask/src/audit/policy.rs with the reason",
            findings.licence_errors.len()
        );
    }
    if !unicode.is_empty() {
        bail!(
            "{}, whose Unicode back end brings ICU4X back; host names are ASCII: run \
             `cargo update -p idna_adapter --precise 1.0.0` (in fuzz/ too)",
            unicode.join(" and ")
        );
    }
    Ok(())
}

/// The workspace's `cargo metadata`, as locked, for the targets the binaries are built for.
fn metadata() -> anyhow::Result<serde_json::Value> {
    let mut args = vec!["metadata", "--format-version", "1", "--locked"];
    for target in policy::TARGETS {
        args.extend(["--filter-platform", target]);
    }
    let output = crate::cargo(&args).output().context("cannot run `cargo metadata`")?;
    if !output.status.success() {
        bail!(
            "`cargo metadata --locked` failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    serde_json::from_slice(&output.stdout).context("cannot read `cargo metadata`'s output")
}

/// One lockfile's audit.
struct Audited {
    /// How many packages the lockfile locks.
    packages: usize,
    report: Report,
    /// The locked `idna_adapter` version, when it has a Unicode back end.
    unicode_idna: Option<rustsec::Version>,
}

/// The report for one lockfile: every vulnerability that applies to a locked version, and
/// the unmaintained, unsound and notice advisories as warnings.
fn audit(db: &Database, lockfile: &Path) -> anyhow::Result<Audited> {
    let locked = Lockfile::load(lockfile)
        .with_context(|| format!("cannot read the lockfile {}", lockfile.display()))?;
    let settings = Settings {
        informational_warnings: vec![
            Informational::Unmaintained,
            Informational::Unsound,
            Informational::Notice,
        ],
        ..Settings::default()
    };
    Ok(Audited {
        packages: locked.packages.len(),
        report: Report::generate(db, &locked, &settings),
        unicode_idna: unicode_idna(&locked),
    })
}

/// The locked `idna_adapter` version if it is not the ASCII-only one.
fn unicode_idna(locked: &Lockfile) -> Option<rustsec::Version> {
    let ascii = rustsec::VersionReq::parse(ASCII_IDNA).ok()?;
    locked
        .packages
        .iter()
        .find(|package| package.name.as_str() == "idna_adapter" && !ascii.matches(&package.version))
        .map(|package| package.version.clone())
}

/// The report as printed: a line per finding, vulnerabilities first.
fn describe(lockfile: &str, audited: &Audited) -> String {
    let report = &audited.report;
    let warnings: Vec<&Warning> = report.warnings.values().flatten().collect();
    let mut out = format!(
        "audit: {lockfile}: {} packages, {} vulnerable, {} warning(s)\n",
        audited.packages,
        report.vulnerabilities.count,
        warnings.len()
    );
    for vulnerability in &report.vulnerabilities.list {
        out.push_str(&vulnerability_line(vulnerability));
    }
    for warning in warnings {
        out.push_str(&warning_line(warning));
    }
    out
}

fn vulnerability_line(vulnerability: &Vulnerability) -> String {
    let advisory = &vulnerability.advisory;
    let patched = requirements(vulnerability.versions.patched());
    format!(
        "  error: {} {} {}: {} (patched: {patched})\n",
        advisory.id, vulnerability.package.name, vulnerability.package.version, advisory.title
    )
}

fn warning_line(warning: &Warning) -> String {
    let mut line = format!(
        "  warning ({}): {} {}",
        warning.kind.as_str(),
        warning.package.name,
        warning.package.version
    );
    if let Some(advisory) = &warning.advisory {
        let _ = write!(line, ": {} {}", advisory.id, advisory.title);
    }
    if let Some(versions) = &warning.versions {
        let _ = write!(line, " (patched: {})", requirements(versions.patched()));
    }
    line.push('\n');
    line
}

fn requirements(list: &[rustsec::VersionReq]) -> String {
    if list.is_empty() {
        return "none".to_owned();
    }
    list.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database of two advisories for one crate: a vulnerability patched in 1.2.3, and
    /// an unmaintained notice for every version.
    fn database(dir: &Path) -> Database {
        let crate_dir = dir.join("crates/demo");
        std::fs::create_dir_all(&crate_dir).unwrap();
        std::fs::write(
            crate_dir.join("RUSTSEC-2099-0001.md"),
            "```toml\n[advisory]\nid = \"RUSTSEC-2099-0001\"\npackage = \"demo\"\n\
             date = \"2099-01-01\"\n\n[versions]\npatched = [\">= 1.2.3\"]\n\
             unaffected = [\"< 1.0.0\"]\n```\n\n# Overflow in demo\n\nDetails.\n",
        )
        .unwrap();
        std::fs::write(
            crate_dir.join("RUSTSEC-2099-0002.md"),
            "```toml\n[advisory]\nid = \"RUSTSEC-2099-0002\"\npackage = \"demo\"\n\
             date = \"2099-01-02\"\ninformational = \"unmaintained\"\n\n[versions]\n\
             patched = []\n```\n\n# demo is unmaintained\n\nUse another.\n",
        )
        .unwrap();
        Database::open(dir).unwrap()
    }

    fn lockfile(dir: &Path, version: &str) -> PathBuf {
        locking(dir, "demo", version)
    }

    /// A lockfile of one package from crates.io.
    fn locking(dir: &Path, name: &str, version: &str) -> PathBuf {
        let path = dir.join(format!("Cargo-{name}-{version}.lock"));
        std::fs::write(
            &path,
            format!(
                "version = 4\n\n[[package]]\nname = \"{name}\"\nversion = \"{version}\"\n\
                 source = \"registry+https://github.com/rust-lang/crates.io-index\"\n"
            ),
        )
        .unwrap();
        path
    }

    #[test]
    fn a_locked_version_in_the_vulnerable_range_is_an_error_and_unmaintained_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let db = database(dir.path());
        let audited = audit(&db, &lockfile(dir.path(), "1.2.2")).unwrap();
        assert_eq!(audited.report.vulnerabilities.count, 1);
        let text = describe("Cargo.lock", &audited);
        assert!(text.starts_with("audit: Cargo.lock: 1 packages, 1 vulnerable, 1 warning(s)\n"));
        assert!(
            text.contains(
                "error: RUSTSEC-2099-0001 demo 1.2.2: Overflow in demo (patched: >=1.2.3)"
            ),
            "{text}"
        );
        assert!(text.contains("warning (unmaintained): demo 1.2.2: RUSTSEC-2099-0002"), "{text}");
    }

    #[test]
    fn patched_and_unaffected_versions_are_not_vulnerable() {
        let dir = tempfile::tempdir().unwrap();
        let db = database(dir.path());
        for version in ["1.2.3", "2.0.0", "0.9.9"] {
            let report = audit(&db, &lockfile(dir.path(), version)).unwrap().report;
            assert_eq!(report.vulnerabilities.count, 0, "{version}");
            assert_eq!(report.warnings.values().flatten().count(), 1, "{version}");
        }
    }

    #[test]
    fn an_idna_adapter_with_a_unicode_back_end_is_flagged() {
        let dir = tempfile::tempdir().unwrap();
        let db = database(dir.path());
        let flagged = |version: &str| {
            let audited = audit(&db, &locking(dir.path(), "idna_adapter", version)).unwrap();
            audited.unicode_idna.map(|v| v.to_string())
        };
        assert_eq!(flagged("1.0.0"), None);
        assert_eq!(flagged("1.1.0").as_deref(), Some("1.1.0"));
        assert_eq!(flagged("1.2.2").as_deref(), Some("1.2.2"));
        assert_eq!(audit(&db, &lockfile(dir.path(), "2.0.0")).unwrap().unicode_idna, None);
    }

    #[test]
    fn the_database_defaults_beside_the_workspace_and_db_overrides_it() {
        let default = Options::parse(&[]).unwrap();
        assert!(default.db.ends_with("../shared/advisory-db"));
        let given = Options::parse(&["--db".to_owned(), "/x/db".to_owned()]).unwrap();
        assert_eq!(given.db, PathBuf::from("/x/db"));
        assert!(Options::parse(&["--db".to_owned()]).is_err());
        assert!(Options::parse(&["--fetch".to_owned()]).is_err());
    }
}
