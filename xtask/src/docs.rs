//! `cargo xtask docs`: builds the book (`docs/`, mdBook) into `target/book/` and checks
//! its links.
//!
//! mdBook is not a Debian package. The pinned version ([`MDBOOK_VERSION`]) is installed
//! with `cargo install` on first use, without its `serve` and `watch` features (HTML and
//! search need neither), into a directory of its own under `$CARGO_HOME`
//! (`$CARGO_HOME/outpost-tools/mdbook-<version>/`), so that it outlives a fresh clone
//! and a `cargo clean`: a cold install compiles for about three minutes of CPU, a warm
//! run only checks the version. `OUTPOST_MDBOOK=<path>` runs another mdbook binary
//! instead (it must be the pinned version).
//!
//! The check reads every generated page: each relative `href` and `src` must name a file
//! of the book (never one outside it), and each `#fragment` an `id` of its page. Links
//! to other sites are listed and counted, never fetched (the machines have no internet).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};

/// The mdBook release the book is built with.
pub const MDBOOK_VERSION: &str = "0.5.4";
/// Runs this mdbook binary instead of the installed one.
const MDBOOK_ENV: &str = "OUTPOST_MDBOOK";
/// Generated pages whose links are not the book's own: the 404 page is served from the
/// site's root (an absolute `<base>`), whatever the path asked for.
const NOT_CHECKED: &[&str] = &["404.html"];

pub fn run(args: &[String]) -> anyhow::Result<()> {
    if let Some(arg) = args.first() {
        bail!("`docs` takes no arguments, got {arg:?}; usage: cargo xtask docs");
    }
    let root = crate::project_root();
    let mdbook = ensure_mdbook()?;
    let out = root.join("target/book");
    build(&mdbook, &root.join("docs"), &out)?;
    let report = check(&out)?;
    println!(
        "docs: {} pages, {} links checked; {} links to other sites not fetched:",
        report.pages,
        report.checked,
        report.external.len()
    );
    for link in &report.external {
        println!("  {link}");
    }
    if !report.broken.is_empty() {
        bail!("{} broken links in the book:\n{}", report.broken.len(), report.broken.join("\n"));
    }
    println!("docs: the book is in {}", out.join("index.html").display());
    Ok(())
}

/// Builds the book in `src` into `out` (emptied first, so that no stale page hides a
/// broken link).
fn build(mdbook: &Path, src: &Path, out: &Path) -> anyhow::Result<()> {
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("cannot remove {}", out.display()))?;
    }
    let mut command = Command::new(mdbook);
    command.arg("build").arg(src).arg("--dest-dir").arg(out);
    crate::run(command)
}

/// The mdbook binary: `$OUTPOST_MDBOOK`, else the pinned version under `$CARGO_HOME`,
/// installed there first if it is missing.
fn ensure_mdbook() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os(MDBOOK_ENV) {
        let path = PathBuf::from(path);
        check_version(&path).with_context(|| format!("{MDBOOK_ENV}={}", path.display()))?;
        return Ok(path);
    }
    let tools = cargo_home()?.join("outpost-tools").join(format!("mdbook-{MDBOOK_VERSION}"));
    let bin = tools.join("bin/mdbook");
    if bin.is_file() && check_version(&bin).is_ok() {
        return Ok(bin);
    }
    println!("docs: installing mdbook {MDBOOK_VERSION} into {} (once)", tools.display());
    let started = Instant::now();
    let version = format!("={MDBOOK_VERSION}");
    let mut install = crate::cargo(&[
        "install",
        "mdbook",
        "--version",
        &version,
        "--locked",
        "--no-default-features",
        "--features",
        "search",
        "--root",
    ]);
    install.arg(&tools);
    // A temporary target directory of its own: the workspace's is not for tools.
    install.env_remove("CARGO_TARGET_DIR");
    crate::run(install)?;
    println!("docs: mdbook installed in {:.0} s", started.elapsed().as_secs_f64());
    check_version(&bin)?;
    Ok(bin)
}

pub(crate) fn cargo_home() -> anyhow::Result<PathBuf> {
    if let Some(home) = std::env::var_os("CARGO_HOME") {
        return Ok(PathBuf::from(home));
    }
    let home = std::env::var_os("HOME").context("neither CARGO_HOME nor HOME is set")?;
    Ok(PathBuf::from(home).join(".cargo"))
}

/// Fails unless `mdbook --version` says the pinned version.
fn check_version(mdbook: &Path) -> anyhow::Result<()> {
    let output = Command::new(mdbook)
        .arg("--version")
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {}", mdbook.display()))?;
    let said = String::from_utf8_lossy(&output.stdout);
    let said = said.trim();
    if said != format!("mdbook v{MDBOOK_VERSION}") {
        bail!("{} is {said:?}, not mdbook v{MDBOOK_VERSION}", mdbook.display());
    }
    Ok(())
}

/// What [`check`] found.
#[derive(Debug, Default)]
struct Report {
    pages: usize,
    checked: usize,
    /// `page: link: why`, one per broken link.
    broken: Vec<String>,
    /// The links to other sites, each once.
    external: BTreeSet<String>,
}

/// Checks the links of every page under `out`.
fn check(out: &Path) -> anyhow::Result<Report> {
    let mut files = Vec::new();
    html_files(out, &mut files)?;
    let mut pages = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        pages.insert(file.strip_prefix(out).unwrap_or(&file).to_path_buf(), text);
    }
    let ids: BTreeMap<&Path, BTreeSet<String>> =
        pages.iter().map(|(page, text)| (page.as_path(), attribute_values(text, "id"))).collect();
    let mut report = Report { pages: pages.len(), ..Report::default() };
    for (page, text) in &pages {
        if NOT_CHECKED.iter().any(|n| page == Path::new(n)) {
            continue;
        }
        let links = attribute_values(text, "href").into_iter().chain(attribute_values(text, "src"));
        for link in links {
            report.checked += 1;
            match resolve(page, &link) {
                Target::External => {
                    report.external.insert(link);
                }
                Target::Broken(why) => {
                    report.broken.push(format!("{}: {link}: {why}", page.display()));
                }
                Target::Local { file, fragment } => {
                    if let Some(why) = missing(out, &ids, &file, fragment.as_deref()) {
                        report.broken.push(format!("{}: {link}: {why}", page.display()));
                    }
                }
            }
        }
    }
    Ok(report)
}

/// Why the local target `file#fragment` does not resolve, if it does not.
fn missing(
    out: &Path,
    ids: &BTreeMap<&Path, BTreeSet<String>>,
    file: &Path,
    fragment: Option<&str>,
) -> Option<String> {
    let path = out.join(file);
    let file = if path.is_dir() { file.join("index.html") } else { file.to_path_buf() };
    if !out.join(&file).is_file() {
        return Some(format!("no file {}", file.display()));
    }
    let fragment = fragment.filter(|f| !f.is_empty())?;
    match ids.get(file.as_path()) {
        Some(page_ids) if page_ids.contains(fragment) => None,
        Some(_) => Some(format!("no id {fragment:?} in {}", file.display())),
        None => None, // not a page (a stylesheet or script): fragments mean nothing there
    }
}

/// Where a link points.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// Another site (or a mail address): listed, not fetched.
    External,
    /// A file of the book, relative to the book's root, and the fragment, if any.
    Local {
        file: PathBuf,
        fragment: Option<String>,
    },
    Broken(String),
}

/// Resolves `link`, found on `page` (relative to the book's root).
fn resolve(page: &Path, link: &str) -> Target {
    let link = link.replace("&amp;", "&");
    if let Some((scheme, _)) = link.split_once(':')
        && !scheme.is_empty()
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    {
        return match scheme {
            "http" | "https" | "mailto" => Target::External,
            _ => Target::Broken(format!("a link of scheme {scheme:?}")),
        };
    }
    let (path, fragment) = match link.split_once('#') {
        Some((path, fragment)) => (path, Some(percent_decoded(fragment))),
        None => (link.as_str(), None),
    };
    let path = path.split('?').next().unwrap_or_default();
    if path.starts_with('/') {
        return Target::Broken("an absolute path: the book may be served from anywhere".into());
    }
    if path.is_empty() {
        return Target::Local { file: page.to_path_buf(), fragment };
    }
    let mut file = page.parent().map(Path::to_path_buf).unwrap_or_default();
    for part in Path::new(&percent_decoded(path)).components() {
        match part {
            Component::Normal(name) => file.push(name),
            Component::ParentDir if !file.pop() => {
                return Target::Broken("leaves the book".into());
            }
            _ => {}
        }
    }
    Target::Local { file, fragment }
}

/// `%XX` escapes decoded (what mdBook writes for characters outside ASCII).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The values of every `name="..."` attribute in `html` (a whole attribute name: `id`
/// is not `data-id`).
fn attribute_values(html: &str, name: &str) -> BTreeSet<String> {
    let pattern = format!("{name}=\"");
    let mut values = BTreeSet::new();
    for (at, _) in html.match_indices(&pattern) {
        if !html[..at].ends_with(|c: char| c.is_ascii_whitespace()) {
            continue;
        }
        let rest = &html[at + pattern.len()..];
        if let Some(end) = rest.find('"') {
            values.insert(rest[..end].to_owned());
        }
    }
    values
}

fn html_files(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            html_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "html") {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(file: &str, fragment: Option<&str>) -> Target {
        Target::Local { file: file.into(), fragment: fragment.map(str::to_owned) }
    }

    #[test]
    fn links_resolve_against_their_page() {
        let page = Path::new("guide/first-pod.html");
        assert_eq!(resolve(page, "install.html"), local("guide/install.html", None));
        assert_eq!(
            resolve(page, "../contract/m-merge.html#m10"),
            local("contract/m-merge.html", Some("m10"))
        );
        assert_eq!(
            resolve(page, "#look-at-the-pods"),
            local("guide/first-pod.html", Some("look-at-the-pods"))
        );
        assert_eq!(resolve(page, "../css/x.css?v=1"), local("css/x.css", None));
        assert_eq!(resolve(page, "a%20b.html"), local("guide/a b.html", None));
    }

    #[test]
    fn other_sites_are_external_and_escapes_are_broken() {
        let page = Path::new("index.html");
        assert_eq!(resolve(page, "https://github.com/kubernetes"), Target::External);
        assert_eq!(resolve(page, "mailto:x@example.org"), Target::External);
        assert!(matches!(resolve(page, "../README.md"), Target::Broken(_)));
        assert!(matches!(resolve(page, "/guide/install.html"), Target::Broken(_)));
        assert!(matches!(resolve(page, "javascript:void(0)"), Target::Broken(_)));
    }

    #[test]
    fn attributes_are_whole_names() {
        let html = r##"<h2 id="s1">x</h2><div data-id="no"><a href="a.html#s1">a</a><a class="x" href="#s1">"##;
        assert_eq!(attribute_values(html, "id"), BTreeSet::from(["s1".to_owned()]));
        assert_eq!(
            attribute_values(html, "href"),
            BTreeSet::from(["a.html#s1".to_owned(), "#s1".to_owned()])
        );
    }

    #[test]
    fn a_missing_page_or_anchor_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        std::fs::create_dir(out.join("guide")).unwrap();
        std::fs::write(
            out.join("index.html"),
            r##"<h1 id="top"></h1><a href="guide/a.html#here">"##,
        )
        .unwrap();
        std::fs::write(
            out.join("guide/a.html"),
            r##"<h2 id="here"></h2><a href="../index.html#top"></a><a href="../index.html#gone"></a><a href="b.html"></a><a href="https://example.org/"></a>"##,
        )
        .unwrap();
        let report = check(out).unwrap();
        assert_eq!(report.pages, 2);
        assert_eq!(report.checked, 5);
        assert_eq!(report.external, BTreeSet::from(["https://example.org/".to_owned()]));
        assert_eq!(
            report.broken,
            [
                "guide/a.html: ../index.html#gone: no id \"gone\" in index.html",
                "guide/a.html: b.html: no file guide/b.html",
            ]
        );
    }
}
