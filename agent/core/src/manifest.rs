//! Decoding, defaulting (S1–S9) and validation of static pod manifests.
//!
//! [`decode`] is the module's entry point: bytes in, defaulted and validated pods out, or
//! every problem found. A manifest is accepted or rejected as a whole.
//!
//! - `parse`: size and encoding checks, `kind`/`apiVersion` dispatch (S8, S9);
//!   `yaml`: YAML and JSON to nodes with their positions, read as kubelet reads them
//!   (S12); `typed`: nodes to pods, with every key the pod's types do not know;
//!   `nesting`: a bound on flow nesting, checked before parsing.
//! - `default`: kubelet's `applyDefaults` for static pods (S2–S7).
//! - `validate`: a useful subset of kubelet's static pod validation (`ValidatePodCreate`);
//!   then [`admission`] refuses what Outpost would not honour (A1).

use std::fmt;
use std::path::Path;

use k8s_openapi::api::core::v1::Pod;

use crate::admission::{self, NodeFacts, Severity};
use crate::pod::Source;

mod default;
mod document;
mod nesting;
mod parse;
mod typed;
pub(crate) mod validate;
mod yaml;

/// The largest manifest accepted, in bytes (S8).
pub const MAX_MANIFEST_BYTES: usize = 10 * 1024 * 1024;

/// Where a manifest came from; decides `config.source`, the S7 toleration, and the
/// location string hashed into the UID (S5).
#[derive(Debug, Clone, Copy)]
pub enum Origin<'a> {
    /// A file of the manifest directory (or the single manifest file).
    File(&'a Path),
    /// The manifest URL.
    Url(&'a str),
    /// A manifest pushed to the local API, under this key.
    Push(&'a str),
}

impl Origin<'_> {
    /// The pod source this origin belongs to.
    pub fn source(&self) -> Source {
        match self {
            Origin::File(_) => Source::File,
            Origin::Url(_) => Source::Url,
            Origin::Push(_) => Source::Push,
        }
    }

    /// `file:<path>`, `url:<url>` or `push:<key>`: the location hashed into the UID (S5).
    pub fn location(&self) -> String {
        match self {
            Origin::File(path) => format!("file:{}", path.display()),
            Origin::Url(url) => format!("url:{url}"),
            Origin::Push(key) => format!("push:{key}"),
        }
    }
}

/// One problem in a manifest.
///
/// Display is `L:C: <what is wrong and what to do>`, 1-based line and column, the prefix
/// only when the position is known. The origin is not repeated in each error: the caller
/// that read the manifest prefixes it, as compilers do (`/etc/outpost/web.yaml:5:2: ...`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// S8: the manifest is over [`MAX_MANIFEST_BYTES`]; nothing of it was parsed.
    #[error(
        "manifest is {size} bytes, over the limit of {limit} bytes (10 MiB); split it into smaller manifests"
    )]
    TooLarge { size: usize, limit: usize },

    /// The manifest is not UTF-8; `offset` is the byte offset of the first invalid byte.
    #[error("{line}:{column}: invalid UTF-8 at byte offset {offset}; save the manifest as UTF-8")]
    NotUtf8 { offset: usize, line: usize, column: usize },

    /// The text could not be decoded: a syntax error, a value of the wrong type (the
    /// message starts with the field path), a bad merge key, or an input past a limit
    /// (nesting, alias repetition or expansion). `message` is the parser's own message
    /// without its position suffix; it is the error itself, not a cause, so it is not
    /// kept as a `source`.
    #[error("{}cannot decode {format}: {message}", at(*position))]
    Parse { format: Format, message: String, position: Option<(usize, usize)> },

    /// A document has no `kind`.
    #[error(
        "{}kind: missing; a static pod manifest holds `kind: Pod` (or a `PodList` or `List` of pods) with `apiVersion: v1`",
        at(*position)
    )]
    MissingKind { position: Option<(usize, usize)> },

    /// A document is something other than a Pod, PodList or List.
    #[error(
        "{}kind: {kind} (apiVersion {}) is not a pod; a static pod manifest holds only `kind: Pod`, `PodList` or `List` of pods",
        at(*position),
        api_version.as_deref().unwrap_or("missing")
    )]
    UnsupportedKind { kind: String, api_version: Option<String>, position: Option<(usize, usize)> },

    /// A Pod, PodList or List whose `apiVersion` is missing or not `v1`.
    #[error(
        "{}apiVersion: {}; kind {kind} needs `apiVersion: v1`",
        at(*position),
        found.as_deref().map_or_else(|| "missing".to_owned(), |v| format!("{v:?} is not supported"))
    )]
    ApiVersion { kind: String, found: Option<String>, position: Option<(usize, usize)> },

    /// S1: the pod has no `metadata.name`. `field` is the path prefix (`items[2].` in a list).
    #[error(
        "{}{field}metadata.name: missing; a static pod needs a name (the agent appends \"-<node name>\")",
        at(*position)
    )]
    MissingName { field: String, position: Option<(usize, usize)> },

    /// A pod failed validation; `field` is the full field path.
    #[error("{}{field}: {message}", at(*position))]
    Invalid { field: String, message: String, position: Option<(usize, usize)> },
}

/// The manifest's syntax, for [`Error::Parse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Yaml,
    Json,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Yaml => "YAML",
            Format::Json => "JSON",
        })
    }
}

/// `L:C: `, or nothing when the position is unknown.
fn at(position: Option<(usize, usize)>) -> String {
    position.map_or_else(String::new, |(line, column)| format!("{line}:{column}: "))
}

impl Error {
    /// The 1-based line and column the error concerns, when known.
    pub fn position(&self) -> Option<(usize, usize)> {
        match self {
            Error::TooLarge { .. } => None,
            Error::NotUtf8 { line, column, .. } => Some((*line, *column)),
            Error::Parse { position, .. }
            | Error::MissingKind { position, .. }
            | Error::UnsupportedKind { position, .. }
            | Error::ApiVersion { position, .. }
            | Error::MissingName { position, .. }
            | Error::Invalid { position, .. } => *position,
        }
    }

    /// The path of the field the error concerns, from its document's root.
    fn field(&self) -> Option<String> {
        match self {
            Error::MissingKind { .. } | Error::UnsupportedKind { .. } => Some("kind".into()),
            Error::ApiVersion { .. } => Some("apiVersion".into()),
            Error::MissingName { field, .. } => Some(format!("{field}metadata.name")),
            Error::Invalid { field, .. } => Some(field.clone()),
            Error::TooLarge { .. } | Error::NotUtf8 { .. } | Error::Parse { .. } => None,
        }
    }

    /// Fills in the position of an error made before its document was located.
    fn set_position(&mut self, at: Option<(usize, usize)>) {
        match self {
            Error::TooLarge { .. } | Error::NotUtf8 { .. } => {}
            Error::Parse { position, .. }
            | Error::MissingKind { position, .. }
            | Error::UnsupportedKind { position, .. }
            | Error::ApiVersion { position, .. }
            | Error::MissingName { position, .. }
            | Error::Invalid { position, .. } => *position = position.or(at),
        }
    }
}

/// All problems found in one manifest, in document order.
#[derive(Debug)]
pub struct Errors(pub Vec<Error>);

impl fmt::Display for Errors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Errors {}

/// A field of a valid pod that Outpost honours differently from what a user may expect,
/// where kubelet would also run the pod (A1: an admission warning, e.g. a `nodeSelector`
/// that is not checked).
///
/// Display is `L:C: warning: <field>: <what and why>`, the prefix only when the position
/// (of the pod's document or list item) is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The full field path (`items[2].` first in a list).
    pub field: String,
    pub message: String,
    pub position: Option<(usize, usize)>,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}warning: {}: {}", at(self.position), self.field, self.message)
    }
}

/// A decoded manifest: its pods, and the warnings about them.
#[derive(Debug)]
pub struct Decoded {
    pub pods: Vec<Pod>,
    pub warnings: Vec<Warning>,
}

/// Decodes a static pod manifest: the size cap (S8) is checked before parsing, then the
/// manifest is parsed (S9), defaulted (S1–S7) and validated.
///
/// Returns every pod in it in document order (none for an empty manifest), or every error
/// found: one invalid pod rejects the whole manifest.
pub fn decode(bytes: &[u8], origin: Origin<'_>, node_name: &str) -> Result<Vec<Pod>, Errors> {
    decode_with_warnings(bytes, origin, node_name).map(|decoded| decoded.pods)
}

/// [`decode`], with the admission warnings about the pods (`outpost validate` shows them).
///
/// Validation includes admission ([`admission::review`], A1): a field Outpost would not
/// honour is an error naming it. The manifest alone is checked, against
/// [`NodeFacts::permissive`]: what depends on the node (AppArmor, unsafe sysctls) is
/// decided where the node is known.
pub fn decode_with_warnings(
    bytes: &[u8],
    origin: Origin<'_>,
    node_name: &str,
) -> Result<Decoded, Errors> {
    let text = parse::text(bytes).map_err(|error| Errors(vec![error]))?;
    let mut parsed = parse::parse(text);
    let mut errors = std::mem::take(&mut parsed.errors);
    let mut warnings = Vec::new();
    for (anchor, unknown) in std::mem::take(&mut parsed.unknown) {
        match unknown_field(unknown) {
            Ok(warning) => warnings.push((anchor, warning)),
            Err(error) => errors.push((anchor, error)),
        }
    }

    let facts = NodeFacts::permissive();
    let mut pods = Vec::with_capacity(parsed.pods.len());
    for (anchor, pod) in std::mem::take(&mut parsed.pods) {
        let ordinal = pods.len();
        let pod = default::apply(pod, origin, node_name, ordinal);
        let prefix = anchor.field_prefix();
        let problems = validate::validate(&pod, &prefix);
        errors.extend(problems.into_iter().map(|error| (anchor, error)));
        for finding in admission::review(&pod, &facts, origin.source()) {
            let field = format!("{prefix}{}", finding.field);
            // The message names the field; the error's display already starts with it.
            let message = finding
                .message
                .strip_prefix(&format!("{}: ", finding.field))
                .unwrap_or(&finding.message)
                .to_owned();
            match finding.severity {
                Severity::Refused => {
                    errors.push((anchor, Error::Invalid { field, message, position: None }));
                }
                Severity::Warning => {
                    warnings.push((anchor, Warning { field, message, position: None }))
                }
            }
        }
        pods.push(pod);
    }

    // Problems found after parsing point at their field's line, or at the nearest part
    // of its path the manifest writes (a missing field: its parent).
    for (anchor, error) in &mut errors {
        if error.position().is_none() {
            error.set_position(parsed.position(*anchor, error.field().as_deref()));
        }
    }
    for (anchor, warning) in &mut warnings {
        if warning.position.is_none() {
            warning.position = parsed.position(*anchor, Some(&warning.field));
        }
    }
    // Document order, then item order; a stable sort keeps each pod's problems in the
    // order they were found (parsing, then validation in field order).
    warnings.sort_by_key(|(anchor, _)| *anchor);
    let warnings = warnings.into_iter().map(|(_, warning)| warning).collect();
    if errors.is_empty() {
        return Ok(Decoded { pods, warnings });
    }
    errors.sort_by_key(|(anchor, _)| *anchor);
    Err(Errors(errors.into_iter().map(|(_, error)| error).collect()))
}

/// The keys of a pod written as JSON that the Pod type does not know (S12), as field
/// paths (`spec.containers[0].securityContext.cgroupOptions`), in the order written: an
/// API pod may come from an API server newer than this Outpost. Parsing JSON with
/// serde_json into a `Pod` drops them without a word.
pub fn unknown_fields(pod: &serde_json::Value) -> Vec<String> {
    let node = yaml::Node::from_json(pod, (1, 1));
    let (_, unknown) = typed::decode::<Pod>(&node, "");
    unknown.into_iter().map(|unknown| unknown.field).collect()
}

/// Whether a field path is inside a `securityContext`, where an unknown field refuses
/// the pod (S12).
pub fn in_security_context(field: &str) -> bool {
    field.split(['.', '[']).any(|part| part == "securityContext")
}

/// A key the pod's types do not know (S12): a warning (kubelet drops it silently), or,
/// inside a `securityContext`, an error: a setting Outpost cannot read could be one that
/// restricts the container, and running without it could weaken isolation.
fn unknown_field(unknown: typed::Unknown) -> Result<Warning, Error> {
    let hint =
        unknown.suggestion.map_or_else(String::new, |name| format!(" (did you mean {name}?)"));
    let security = in_security_context(&unknown.field);
    let message = if security {
        format!(
            "unknown field in a securityContext{hint}; Outpost refuses a pod whose security settings it cannot read in full: fix the name, or remove the field if it is newer than this Outpost"
        )
    } else {
        format!("unknown field, ignored as kubelet ignores it{hint}")
    };
    let (field, position) = (unknown.field, Some(unknown.at));
    if security {
        return Err(Error::Invalid { field, message, position });
    }
    Ok(Warning { field, message, position })
}

#[cfg(test)]
mod tests;
