//! Reading the book (`docs/src/`, mdBook markdown): its pages, the anchors its headings
//! declare (`## M9. ... {#m9}`), and the cells of its tables.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// `docs/src`.
pub fn src() -> PathBuf {
    super::root().join("docs/src")
}

/// A page's markdown, by its path under `docs/src`.
pub fn page(path: &str) -> String {
    let path = src().join(path);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every anchor a heading of the book declares with `{#id}`, with the page it is on.
pub fn anchors() -> BTreeMap<String, PathBuf> {
    let mut pages = Vec::new();
    markdown_files(&src(), &mut pages);
    let mut anchors = BTreeMap::new();
    for path in pages {
        let text = fs::read_to_string(&path).unwrap();
        for line in text.lines().filter(|l| l.starts_with('#')) {
            if let Some(id) = line.trim_end().strip_suffix('}').and_then(|l| l.rsplit_once("{#")) {
                let page = path.strip_prefix(src()).unwrap().to_path_buf();
                anchors.insert(id.1.to_owned(), page);
            }
        }
    }
    anchors
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            markdown_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

/// The rows of every table in `markdown` (header rows included, separator rows not),
/// each as its cells, trimmed. A `\|` inside a cell is not a separator.
pub fn table_rows(markdown: &str) -> Vec<Vec<String>> {
    markdown
        .lines()
        .filter(|l| l.starts_with('|'))
        .filter(|l| !l.chars().all(|c| "|-: ".contains(c)))
        .map(|line| {
            let mut cells = Vec::new();
            let mut cell = String::new();
            let mut escaped = false;
            for c in line.trim().trim_start_matches('|').chars() {
                match c {
                    '|' if !escaped => cells.push(std::mem::take(&mut cell).trim().to_owned()),
                    '\\' => {
                        escaped = true;
                        continue;
                    }
                    c => cell.push(c),
                }
                escaped = false;
            }
            cells
        })
        .collect()
}

/// The code spans (`` `x` ``) of a cell.
pub fn code_spans(cell: &str) -> Vec<String> {
    cell.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

/// The metric families the metrics reference lists (the agent's own and those of
/// kubelet's paths), by family name: a counter's without `_total`, an info metric's
/// without `_info` (as `# TYPE` lines name them).
pub fn documented_metrics() -> BTreeSet<String> {
    table_rows(&page("reference/metrics.md"))
        .iter()
        .filter_map(|row| row.first())
        .flat_map(|cell| code_spans(cell))
        .map(|name| family(&name).to_owned())
        .collect()
}

/// A sample's family name: without `_total` or `_info`.
pub fn family(name: &str) -> &str {
    name.strip_suffix("_total").or_else(|| name.strip_suffix("_info")).unwrap_or(name)
}
