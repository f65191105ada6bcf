//! Where a document or list item starts, for errors found after parsing (a missing
//! `kind`, validation).
//!
//! Neither parser reports the position of what it parsed successfully, only of errors; so
//! a probe deserializes the document again and fails on purpose at the object wanted, and
//! the parser's error gives its line and column.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::de::{
    DeserializeSeed, Deserializer, Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor,
};

use super::Format;
use super::document::Anchor;
use super::parse::{json_text, line_column};

/// How many bytes of re-parsing may go to finding list items; past that, an item's
/// problems point at its list's start (their field path still names the item).
const ITEM_SEARCH_BUDGET: usize = 16 * 1024 * 1024;

/// The line and column where each anchor's document (or list item) starts, in order.
pub(super) fn locate(
    text: &str,
    format: Format,
    anchors: &[Anchor],
) -> Vec<Option<(usize, usize)>> {
    let documents: BTreeSet<usize> = anchors.iter().map(|anchor| anchor.document).collect();
    let starts = document_starts(text, format, &documents);
    let mut probes_left = ITEM_SEARCH_BUDGET / text.len().max(1);
    let mut items: BTreeMap<Anchor, Option<(usize, usize)>> = BTreeMap::new();
    anchors
        .iter()
        .map(|anchor| {
            let start = starts.get(&anchor.document).copied();
            let Some(item) = anchor.item else {
                return start;
            };
            let found = *items.entry(*anchor).or_insert_with(|| {
                probes_left = probes_left.checked_sub(1)?;
                item_start(text, format, anchor.document, item)
            });
            found.or(start)
        })
        .collect()
}

fn document_starts(
    text: &str,
    format: Format,
    documents: &BTreeSet<usize>,
) -> BTreeMap<usize, (usize, usize)> {
    match format {
        Format::Json => documents
            .iter()
            .filter_map(|&document| Some((document, json_probe(text, None)?)))
            .collect(),
        Format::Yaml => {
            let Some(&last) = documents.last() else {
                return BTreeMap::new();
            };
            serde_yaml_ng::Deserializer::from_str(text)
                .take(last + 1)
                .enumerate()
                .filter(|(document, _)| documents.contains(document))
                .filter_map(|(document, deserializer)| {
                    Some((document, yaml_probe(deserializer, None)?))
                })
                .collect()
        }
    }
}

fn item_start(text: &str, format: Format, document: usize, item: usize) -> Option<(usize, usize)> {
    match format {
        Format::Json => json_probe(text, Some(item)),
        Format::Yaml => {
            let deserializer = serde_yaml_ng::Deserializer::from_str(text).nth(document)?;
            yaml_probe(deserializer, Some(item))
        }
    }
}

fn yaml_probe(
    document: serde_yaml_ng::Deserializer<'_>,
    item: Option<usize>,
) -> Option<(usize, usize)> {
    let error = Probe(item).deserialize(document).err()?;
    error.location().map(|l| (l.line(), l.column()))
}

fn json_probe(text: &str, item: Option<usize>) -> Option<(usize, usize)> {
    let text = json_text(text);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let error = Probe(item).deserialize(&mut deserializer).err()?;
    // serde_json reports the probe's error at or just after the `{` it stopped at.
    let line_start = match error.line() {
        0 => return None,
        1 => 0,
        line => text.match_indices('\n').nth(line - 2)?.0 + 1,
    };
    let reported = (line_start + error.column().saturating_sub(1)).min(text.len().checked_sub(1)?);
    let brace = text.as_bytes()[..=reported].iter().rposition(|&b| b == b'{')?;
    Some(line_column(text, brace))
}

/// Fails on the object it is asked to find (the document's root, or `items[i]`), so that
/// the parser's error tells where that object starts.
#[derive(Debug, Clone, Copy)]
struct Probe(Option<usize>);

const FOUND: &str = "found";

impl<'de> DeserializeSeed<'de> for Probe {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Probe {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some(item) = self.0 else {
            return Err(A::Error::custom(FOUND));
        };
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" {
                return map.next_value_seed(Items(item));
            }
            map.next_value::<IgnoredAny>()?;
        }
        Err(A::Error::custom(FOUND))
    }
}

/// Finds item `.0` of a list's `items`.
#[derive(Debug, Clone, Copy)]
struct Items(usize);

impl<'de> DeserializeSeed<'de> for Items {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Items {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of items")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        for _ in 0..self.0 {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                break;
            }
        }
        seq.next_element_seed(Probe(None))?;
        Err(A::Error::custom(FOUND))
    }
}
