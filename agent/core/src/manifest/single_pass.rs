//! The common case in one pass: documents that name their `kind` before their content
//! (as kubectl, Helm and people write them), with no aliases, merge keys or errors.
//!
//! Each document is read once: `apiVersion` and `kind` as they come, then `metadata`,
//! `spec`, `status` or `items` straight into the pod types, since the kind is known by
//! then. Anything else — a kind written after the content, any error — gives up, and the
//! two-pass reader in `parse` reads the manifest from the start, so results and error
//! messages are exactly the two-pass reader's.

use std::fmt;

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};

use super::document::{Anchor, Kind, TypeMeta, classify};

/// The pods of every document, or `None`: read it with the two-pass reader instead.
pub(super) fn yaml(text: &str) -> Option<Vec<(Anchor, Pod)>> {
    let mut pods = Vec::new();
    for (document, deserializer) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        // An empty document (a trailing `---`, only comments) has no pods.
        if let Some(doc) = Option::<Document>::deserialize(deserializer).ok()? {
            pods.extend(doc.pods(document)?);
        }
    }
    Some(pods)
}

/// The same for a JSON manifest (one document).
pub(super) fn json(text: &str) -> Option<Vec<(Anchor, Pod)>> {
    let read = serde_json::from_str::<Option<Document>>(text).ok()?;
    read?.pods(0)
}

/// One document as read in a single pass. `None` in `read` for an empty document.
#[derive(Debug, Default)]
struct Document {
    api_version: Option<String>,
    kind: Option<String>,
    metadata: Option<ObjectMeta>,
    spec: Option<PodSpec>,
    status: Option<PodStatus>,
    items: Option<Vec<Pod>>,
}

impl Document {
    /// The document's pods; `None` if its kind is not a pod or a list of pods (the
    /// two-pass reader reports that).
    fn pods(self, document: usize) -> Option<Vec<(Anchor, Pod)>> {
        let head = TypeMeta { api_version: self.api_version, kind: self.kind };
        Some(match classify(Some(head)).ok()? {
            Kind::Empty => Vec::new(),
            Kind::Pod => {
                let pod = Pod {
                    metadata: self.metadata.unwrap_or_default(),
                    spec: self.spec,
                    status: self.status,
                };
                vec![(Anchor::document(document), pod)]
            }
            Kind::List => self
                .items
                .unwrap_or_default()
                .into_iter()
                .enumerate()
                .map(|(item, pod)| (Anchor { document, item: Some(item) }, pod))
                .collect(),
        })
    }
}

/// The top-level keys this pass cares about.
enum Field {
    ApiVersion,
    Kind,
    Metadata,
    Spec,
    Status,
    Items,
    Other,
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Field, D::Error> {
        struct FieldVisitor;
        impl Visitor<'_> for FieldVisitor {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Field, E> {
                Ok(match key {
                    "apiVersion" => Field::ApiVersion,
                    "kind" => Field::Kind,
                    "metadata" => Field::Metadata,
                    "spec" => Field::Spec,
                    "status" => Field::Status,
                    "items" => Field::Items,
                    _ => Field::Other,
                })
            }
        }
        deserializer.deserialize_identifier(FieldVisitor)
    }
}

impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Document, D::Error> {
        deserializer.deserialize_map(DocumentVisitor)
    }
}

struct DocumentVisitor;

impl<'de> Visitor<'de> for DocumentVisitor {
    type Value = Document;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Document, A::Error> {
        let mut doc = Document::default();
        while let Some(field) = map.next_key::<Field>()? {
            // Content before the kind: this pass cannot know what to read it as.
            let kind = doc.kind.as_deref();
            let content =
                matches!(field, Field::Metadata | Field::Spec | Field::Status | Field::Items);
            if content && kind.is_none() {
                return Err(de::Error::custom("kind after content"));
            }
            let is_pod = kind == Some("Pod");
            let is_list = matches!(kind, Some("PodList" | "List"));
            let repeated = match field {
                Field::ApiVersion => doc.api_version.is_some(),
                Field::Kind => doc.kind.is_some(),
                _ => false,
            };
            if repeated {
                // The two-pass reader rejects a repeated apiVersion or kind; let it.
                return Err(de::Error::custom("repeated apiVersion or kind"));
            }
            match field {
                Field::ApiVersion => doc.api_version = map.next_value()?,
                Field::Kind => doc.kind = map.next_value()?,
                Field::Metadata if is_pod => doc.metadata = map.next_value()?,
                Field::Spec if is_pod => doc.spec = map.next_value()?,
                Field::Status if is_pod => doc.status = map.next_value()?,
                Field::Items if is_list => doc.items = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(doc)
    }
}

#[cfg(test)]
mod tests;
