//! What a manifest's documents are: which pod a problem concerns ([`Anchor`]) and what
//! kind of object a document holds ([`Kind`], from its `apiVersion` and `kind`, S9).

use super::Error;

/// Which pod of the manifest a problem concerns: the document (counting empty ones), and
/// the item when the document is a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Anchor {
    pub(super) document: usize,
    pub(super) item: Option<usize>,
}

impl Anchor {
    pub(super) fn document(document: usize) -> Anchor {
        Anchor { document, item: None }
    }

    /// The field path prefix of the pod: `items[2].` in a list, else empty.
    pub(super) fn field_prefix(&self) -> String {
        self.item.map_or_else(String::new, |i| format!("items[{i}]."))
    }
}

/// What a document holds, from its `kind` and `apiVersion`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// An empty document (`---` with nothing after it, only comments, `null`): skipped.
    Empty,
    Pod,
    /// A `PodList` or a `List`.
    List,
}

/// The `apiVersion` and `kind` of a document.
#[derive(Debug)]
pub(super) struct TypeMeta {
    pub(super) api_version: Option<String>,
    pub(super) kind: Option<String>,
}

pub(super) fn classify(head: Option<TypeMeta>) -> Result<Kind, Error> {
    let Some(TypeMeta { api_version, kind }) = head else {
        return Ok(Kind::Empty);
    };
    let api_version = api_version.filter(|v| !v.is_empty());
    let found = match kind.as_deref() {
        None | Some("") => {
            return Err(Error::MissingKind { position: None });
        }
        Some("Pod") => Kind::Pod,
        Some("PodList" | "List") => Kind::List,
        Some(other) => {
            return Err(Error::UnsupportedKind {
                kind: other.to_owned(),
                api_version,
                position: None,
            });
        }
    };
    if api_version.as_deref() == Some("v1") {
        Ok(found)
    } else {
        Err(Error::ApiVersion {
            kind: kind.unwrap_or_default(),
            found: api_version,
            position: None,
        })
    }
}
