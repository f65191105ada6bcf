//! From bytes to parsed pods: the size cap (S8), UTF-8, YAML or JSON, and the
//! `kind`/`apiVersion` of each document (S9).
//!
//! Most manifests are read in one pass (`single_pass`). The rest, and every manifest with
//! an error, is read in two passes so that errors keep the parser's line and column: the first
//! reads only each document's `apiVersion` and `kind`, the second deserializes each
//! document straight into a `Pod` or a list of pods. Problems found after parsing are
//! located later, by `locate`, and only if there are any.
//!
//! Kinds accepted, like kubelet's `tryDecodeSinglePod`/`tryDecodePodList`, which decode
//! with the API machinery's universal decoder and so require both `kind` and
//! `apiVersion`: a `Pod`, and (Outpost extension, S9) a YAML stream of Pods, a `PodList`
//! or a `List` whose items are pods. Items of a list may omit `kind`/`apiVersion` (as
//! `kubectl get -o yaml` writes them); when present they must be `Pod`/`v1`. Unknown
//! fields are ignored and a repeated key keeps its last value, as kubelet's lenient
//! decoder does.

use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny};

use super::document::{Anchor, Kind, TypeMeta, classify};
use super::{Error, Format, MAX_MANIFEST_BYTES, expansion, nesting, single_pass};

/// The parsed manifest: its pods and its errors, in document order, each with the pod or
/// document it concerns. Errors without a position are to be located at its start.
#[derive(Debug)]
pub(super) struct Parsed {
    /// The syntax the manifest was read as; `locate` reads it the same way.
    pub(super) format: Format,
    pub(super) pods: Vec<(Anchor, Pod)>,
    pub(super) errors: Vec<(Anchor, Error)>,
}

impl Parsed {
    fn new(format: Format) -> Parsed {
        Parsed { format, pods: Vec::new(), errors: Vec::new() }
    }

    fn failed(format: Format, error: Error) -> Parsed {
        let mut parsed = Parsed::new(format);
        parsed.errors.push((Anchor::document(0), error));
        parsed
    }
}

/// The manifest's text, after the size cap (S8, checked before anything else) and UTF-8.
pub(super) fn text(bytes: &[u8]) -> Result<&str, Error> {
    if bytes.len() > MAX_MANIFEST_BYTES {
        return Err(Error::TooLarge { size: bytes.len(), limit: MAX_MANIFEST_BYTES });
    }
    std::str::from_utf8(bytes).map_err(|error| {
        let offset = error.valid_up_to();
        let valid = String::from_utf8_lossy(&bytes[..offset]);
        let (line, column) = line_column(&valid, offset);
        Error::NotUtf8 { offset, line, column }
    })
}

/// A `PodList` or `List`; other fields (`metadata`) are ignored.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a list of pods (a mapping with items)")]
struct PodItems {
    #[serde(default)]
    items: Option<Vec<Pod>>,
}

/// The pods of one document of a known kind, each with its item index in a list.
fn pods_of<'de, D: Deserializer<'de>>(
    document: D,
    kind: Kind,
) -> Result<Vec<(Option<usize>, Pod)>, D::Error> {
    Ok(match kind {
        Kind::Empty => Vec::new(),
        Kind::Pod => vec![(None, Pod::deserialize(document)?)],
        Kind::List => PodItems::deserialize(document)?
            .items
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, pod)| (Some(i), pod))
            .collect(),
    })
}

/// Whether the text is JSON: its first character (after a byte order mark and white
/// space) opens an object. JSON is YAML too, but serde_json's errors are clearer.
fn is_json(text: &str) -> bool {
    json_text(text).trim_start().starts_with('{')
}

/// serde_json does not skip a byte order mark.
pub(super) fn json_text(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Parses the manifest's text (S9).
pub(super) fn parse(text: &str) -> Parsed {
    if is_json(text) {
        match serde_json::from_str::<Option<TypeMeta>>(json_text(text)) {
            Ok(head) => return parse_json(text, classify(head)),
            // `{` also opens a YAML flow mapping (`{apiVersion: v1, ...}`, unquoted): not
            // JSON, but a manifest kubelet reads. Fall back to YAML if it reads as YAML.
            Err(error) if error.is_syntax() || error.is_eof() => {
                if nesting::check(text).is_ok()
                    && serde_yaml_ng::Deserializer::from_str(text)
                        .all(|document| IgnoredAny::deserialize(document).is_ok())
                {
                    return parse_yaml(text);
                }
                return Parsed::failed(Format::Json, json_error(text, &error));
            }
            Err(error) => return Parsed::failed(Format::Json, json_error(text, &error)),
        }
    }
    parse_yaml(text)
}

fn parse_json(text: &str, kind: Result<Kind, Error>) -> Parsed {
    if let Some(pods) = single_pass::json(json_text(text)) {
        return Parsed { format: Format::Json, pods, errors: Vec::new() };
    }
    let mut parsed = Parsed::new(Format::Json);
    let document = 0;
    match kind {
        Ok(kind) => {
            let mut deserializer = serde_json::Deserializer::from_str(json_text(text));
            match pods_of(&mut deserializer, kind) {
                Ok(pods) => parsed
                    .pods
                    .extend(pods.into_iter().map(|(item, pod)| (Anchor { document, item }, pod))),
                Err(error) => parsed.errors.push((Anchor::document(0), json_error(text, &error))),
            }
        }
        Err(error) => parsed.errors.push((Anchor::document(0), error)),
    }
    parsed
}

fn parse_yaml(text: &str) -> Parsed {
    if let Err(offset) = nesting::check(text) {
        return Parsed::failed(
            Format::Yaml,
            Error::Parse {
                format: Format::Yaml,
                message: format!(
                    "brackets ([...] or {{...}}) nest more than {} deep; a pod manifest needs a few levels at most",
                    nesting::MAX_FLOW_DEPTH
                ),
                position: Some(line_column(text, offset)),
            },
        );
    }
    // The common case, read once; aliases and merge keys take the careful path.
    if !may_merge(text)
        && !expansion::may_alias(text)
        && let Some(pods) = single_pass::yaml(text)
    {
        return Parsed { format: Format::Yaml, pods, errors: Vec::new() };
    }
    two_pass_yaml(text)
}

/// Reads YAML in two passes (kinds, then pods): every manifest the single pass gives up on.
pub(super) fn two_pass_yaml(text: &str) -> Parsed {
    let mut parsed = Parsed::new(Format::Yaml);

    // First pass: each document's kind. After a syntax error the parser cannot go on (it
    // would repeat the error forever), so the first error of this pass ends it.
    let mut kinds = Vec::new();
    for (document, deserializer) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        match Option::<TypeMeta>::deserialize(deserializer) {
            Ok(head) => {
                let kind = classify(head).unwrap_or_else(|error| {
                    parsed.errors.push((Anchor::document(document), error));
                    Kind::Empty
                });
                kinds.push(kind);
            }
            Err(error) => {
                parsed.errors.push((Anchor::document(document), yaml_error(text, &error)));
                break;
            }
        }
    }

    // Aliases are followed only within a budget (see `expansion`); one past it rejects
    // the manifest before any pod is deserialized.
    if expansion::may_alias(text) {
        let mut budget = expansion::Budget::new(expansion::limit(text.len()));
        let documents = serde_yaml_ng::Deserializer::from_str(text).zip(&kinds);
        for (document, (deserializer, kind)) in documents.enumerate() {
            if *kind == Kind::Empty {
                continue;
            }
            if let Err(error) = budget.walk(deserializer) {
                parsed.errors.push((Anchor::document(document), yaml_error(text, &error)));
                kinds.clear();
                break;
            }
        }
    }

    // Second pass: the pods of the documents the first pass read.
    let merges = may_merge(text);
    let documents = serde_yaml_ng::Deserializer::from_str(text).zip(kinds);
    for (document, (deserializer, kind)) in documents.enumerate() {
        let anchor = Anchor::document(document);
        let pods = match pods_of(deserializer, kind) {
            Err(error) => {
                parsed.errors.push((anchor, yaml_error(text, &error)));
                continue;
            }
            Ok(pods) if !merges => pods,
            // Deserializing straight into a pod ignores `<<` as an unknown field. The
            // typed pass above has checked what the document writes out (merged keys
            // never replace written ones); merged in, the document is read once more.
            Ok(_) => match merged(text, document, kind) {
                Ok(pods) => pods,
                Err(error) => {
                    parsed.errors.push((anchor, yaml_error(text, &error)));
                    continue;
                }
            },
        };
        parsed.pods.extend(pods.into_iter().map(|(item, pod)| (Anchor { document, item }, pod)));
    }
    parsed
}

/// Whether the text may use YAML merge keys (`<<: *defaults`), which kubelet's YAML
/// decoder applies.
fn may_merge(text: &str) -> bool {
    text.contains("<<")
}

/// The pods of a document read as a YAML value with merge keys applied. Errors have no
/// position (the caller points them at the document).
fn merged(
    text: &str,
    document: usize,
    kind: Kind,
) -> Result<Vec<(Option<usize>, Pod)>, serde_yaml_ng::Error> {
    let Some(deserializer) = serde_yaml_ng::Deserializer::from_str(text).nth(document) else {
        return Ok(Vec::new());
    };
    let mut value = serde_yaml_ng::Value::deserialize(deserializer)?;
    value.apply_merge()?;
    pods_of(value, kind)
}

/// The 1-based line and column (in characters) of a byte offset.
pub(super) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text.as_bytes()[..offset];
    let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |newline| newline + 1);
    let column = String::from_utf8_lossy(&before[line_start..]).chars().count() + 1;
    (before.iter().filter(|&&b| b == b'\n').count() + 1, column)
}

fn yaml_error(text: &str, error: &serde_yaml_ng::Error) -> Error {
    let position = error.location().map(|l| (l.line(), l.column()));
    Error::Parse {
        format: Format::Yaml,
        message: without_position(error.to_string(), position),
        position: position.map(|position| inside(text, position)),
    }
}

fn json_error(text: &str, error: &serde_json::Error) -> Error {
    let position = (error.line() > 0).then(|| (error.line(), error.column()));
    Error::Parse {
        format: Format::Json,
        message: without_position(error.to_string(), position),
        position: position.map(|position| inside(text, position)),
    }
}

/// A parser's position moved inside the text: libyaml puts an error at the end of a text
/// without a final newline on the line after the last, and serde_json one right after a
/// newline in column 0; both mean the end of the last character before.
fn inside(text: &str, (line, column): (usize, usize)) -> (usize, usize) {
    let end = line_column(text, text.len());
    if (line, column) > end {
        return end;
    }
    if column == 0 {
        let previous = text.split('\n').nth(line.saturating_sub(2)).unwrap_or_default();
        return match line {
            0 | 1 => (1, 1),
            _ => (line - 1, previous.chars().count() + 1),
        };
    }
    (line, column)
}

/// The parser's message without the ` at line L column C` it adds: [`Error`] shows the
/// position itself, in the same form for every error.
fn without_position(message: String, position: Option<(usize, usize)>) -> String {
    match position {
        Some((line, column)) => {
            message.replacen(&format!(" at line {line} column {column}"), "", 1)
        }
        None => message,
    }
}
