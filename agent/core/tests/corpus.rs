//! The manifest corpus (`tests/manifests/`): real shapes with the outcome each must give,
//! written on its first line (S12 among them; see the corpus' README).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use outpost_core::manifest::{Origin, decode_with_warnings};

fn corpus() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/manifests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml" || e == "json"))
        .collect();
    files.sort();
    files
}

/// What a file expects: `ok`, `warning <text>` or `error <text>`. A JSON file, which has
/// no comments, expects `ok`.
fn expected(text: &str) -> (String, String) {
    let Some(line) = text.lines().next().and_then(|l| l.strip_prefix("# expect: ")) else {
        return ("ok".into(), String::new());
    };
    let (outcome, detail) = line.split_once(' ').unwrap_or((line, ""));
    (outcome.to_owned(), detail.to_owned())
}

#[test]
fn s12_every_manifest_of_the_corpus_gives_its_outcome() {
    let files = corpus();
    assert!(files.len() >= 10, "the corpus is missing: {files:?}");
    for path in files {
        let bytes = std::fs::read(&path).unwrap();
        let (outcome, detail) = expected(&String::from_utf8_lossy(&bytes));
        let decoded = decode_with_warnings(&bytes, Origin::File(&path), "edge-1");
        let name = path.display();
        match (outcome.as_str(), decoded) {
            ("ok", Ok(decoded)) => {
                assert!(!decoded.pods.is_empty(), "{name}: no pods");
                assert!(decoded.warnings.is_empty(), "{name}: {:?}", decoded.warnings);
            }
            ("warning", Ok(decoded)) => {
                let first = decoded.warnings.first().map(ToString::to_string);
                assert!(
                    first.as_deref().is_some_and(|w| w.contains(&detail)),
                    "{name}: expected a warning with {detail:?}, got {first:?}"
                );
            }
            ("error", Err(errors)) => {
                let first = errors.0.first().map(ToString::to_string).unwrap_or_default();
                assert!(first.contains(&detail), "{name}: expected {detail:?}, got {first:?}");
            }
            (outcome, got) => panic!("{name}: expected {outcome}, got {got:?}"),
        }
    }
}
