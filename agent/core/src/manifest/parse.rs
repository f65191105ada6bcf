//! From bytes to parsed pods: the size cap (S8), UTF-8, YAML or JSON read as kubelet
//! reads them (S12, in `yaml`), the `kind`/`apiVersion` of each document (S9), then the
//! pods (`typed`), with every key their types do not know.
//!
//! Kinds accepted, like kubelet's `tryDecodeSinglePod`/`tryDecodePodList`, which decode
//! with the API machinery's universal decoder and so require both `kind` and
//! `apiVersion`: a `Pod`, and (Outpost extension, S9) a YAML stream of Pods, a `PodList`
//! or a `List` whose items are pods. Items of a list may omit `kind`/`apiVersion` (as
//! `kubectl get -o yaml` writes them); when present they must be `Pod`/`v1`.

use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize;
use serde::de::IgnoredAny;

use super::document::{Anchor, Kind, TypeMeta, classify};
use super::typed::{self, Unknown};
use super::yaml::{self, Node, Value};
use super::{Error, Format, MAX_MANIFEST_BYTES, nesting};

/// The parsed manifest: its documents, its pods, the keys they do not know and its
/// errors, in document order, each with the pod or document it concerns.
#[derive(Debug)]
pub(super) struct Parsed {
    /// Each document's root node, for the positions of fields.
    pub(super) documents: Vec<Node>,
    pub(super) pods: Vec<(Anchor, Pod)>,
    pub(super) unknown: Vec<(Anchor, Unknown)>,
    pub(super) errors: Vec<(Anchor, Error)>,
}

impl Parsed {
    fn failed(error: Error) -> Parsed {
        Parsed {
            documents: Vec::new(),
            pods: Vec::new(),
            unknown: Vec::new(),
            errors: vec![(Anchor::document(0), error)],
        }
    }

    /// Where `field` (a path from its document's root, `items[2].` first in a list) is
    /// written, or the start of its document.
    pub(super) fn position(&self, anchor: Anchor, field: Option<&str>) -> Option<(usize, usize)> {
        let root = self.documents.get(anchor.document)?;
        let path = match (field, anchor.item) {
            (Some(field), _) => field.to_owned(),
            (None, Some(item)) => format!("items[{item}]"),
            (None, None) => String::new(),
        };
        Some(root.position_of(&path))
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

/// A `PodList` or `List`: its items; its other fields are the list's own.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a list of pods (a mapping with items)")]
struct PodItems {
    #[serde(rename = "apiVersion", default)]
    _api_version: IgnoredAny,
    #[serde(rename = "kind", default)]
    _kind: IgnoredAny,
    #[serde(rename = "metadata", default)]
    _metadata: IgnoredAny,
    #[serde(default)]
    items: Option<Vec<Pod>>,
}

/// Whether the text is JSON: its first character (after a byte order mark and white
/// space) opens an object.
fn is_json(text: &str) -> bool {
    json_text(text).trim_start().starts_with('{')
}

/// serde_json does not skip a byte order mark.
fn json_text(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Parses the manifest's text (S9, S12).
pub(super) fn parse(text: &str) -> Parsed {
    // `{` also opens a YAML flow mapping (`{apiVersion: v1, ...}`, unquoted): JSON is
    // the text serde_json reads, and a JSON syntax error is told in JSON's terms.
    let json = is_json(text).then(|| serde_json::from_str::<IgnoredAny>(json_text(text)));
    let format = match json {
        Some(Ok(_)) => Format::Json,
        _ => Format::Yaml,
    };
    if let Err(offset) = nesting::check(text) {
        let message = format!(
            "brackets ([...] or {{...}}) nest more than {} deep; a pod manifest needs a few levels at most",
            nesting::MAX_FLOW_DEPTH
        );
        let position = Some(line_column(text, offset));
        return Parsed::failed(Error::Parse { format, message, position });
    }
    let documents = match yaml::load(text) {
        Ok(documents) => documents,
        Err(error) => {
            if let Some(Err(json_error)) = json {
                return Parsed::failed(from_json_error(text, &json_error));
            }
            let position = Some(inside(text, error.at));
            let message = error.message;
            return Parsed::failed(Error::Parse { format, message, position });
        }
    };
    read_documents(format, documents)
}

fn read_documents(format: Format, documents: Vec<Node>) -> Parsed {
    let mut parsed =
        Parsed { documents: Vec::new(), pods: Vec::new(), unknown: Vec::new(), errors: Vec::new() };
    for (document, root) in documents.iter().enumerate() {
        let anchor = Anchor::document(document);
        let kind = match kind_of(root, format) {
            Ok(kind) => kind,
            Err(error) => {
                parsed.errors.push((anchor, error));
                continue;
            }
        };
        let (pods, unknown) = match kind {
            Kind::Empty => continue,
            Kind::Pod => {
                let (pod, unknown) = typed::decode::<Pod>(root, "");
                (pod.map(|pod| vec![(None, pod)]), unknown)
            }
            Kind::List => {
                let (list, unknown) = typed::decode::<PodItems>(root, "");
                let pods = list.map(|list| {
                    let items = list.items.unwrap_or_default().into_iter().enumerate();
                    items.map(|(i, pod)| (Some(i), pod)).collect()
                });
                (pods, unknown)
            }
        };
        parsed.unknown.extend(unknown.into_iter().map(|unknown| (anchor, unknown)));
        match pods {
            Ok(pods) => parsed
                .pods
                .extend(pods.into_iter().map(|(item, pod)| (Anchor { document, item }, pod))),
            Err(error) => {
                let position = error.located.as_ref().map(|(_, at)| *at);
                let message = error.to_string();
                parsed.errors.push((anchor, Error::Parse { format, message, position }));
            }
        }
    }
    parsed.documents = documents;
    parsed
}

/// A document's kind from its `apiVersion` and `kind` (S9), or why it has none.
fn kind_of(root: &Node, format: Format) -> Result<Kind, Error> {
    let text = |field: &str| match root.get(field).map(|node| &node.value) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Error::Parse {
            format,
            message: format!("{field}: invalid type: expected a string"),
            position: Some(root.position_of(field)),
        }),
    };
    let head = match &root.value {
        Value::Null => None,
        Value::Map(_) => Some(TypeMeta { api_version: text("apiVersion")?, kind: text("kind")? }),
        _ => {
            return Err(Error::Parse {
                format,
                message: "invalid type: expected a Kubernetes object (a mapping with apiVersion and kind)"
                    .into(),
                position: Some(root.at),
            });
        }
    };
    classify(head)
}

/// The 1-based line and column (in characters) of a byte offset.
pub(super) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text.as_bytes()[..offset];
    let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |newline| newline + 1);
    let column = String::from_utf8_lossy(&before[line_start..]).chars().count() + 1;
    (before.iter().filter(|&&b| b == b'\n').count() + 1, column)
}

fn from_json_error(text: &str, error: &serde_json::Error) -> Error {
    let position = (error.line() > 0).then(|| (error.line(), error.column()));
    let message = match position {
        Some((line, column)) => {
            error.to_string().replacen(&format!(" at line {line} column {column}"), "", 1)
        }
        None => error.to_string(),
    };
    Error::Parse { format: Format::Json, message, position: position.map(|p| inside(text, p)) }
}

/// A parser's position moved inside the text: an error at the end of a text without a
/// final newline may be put on the line after the last, and serde_json puts one right
/// after a newline in column 0; both mean the end of the last character before.
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
