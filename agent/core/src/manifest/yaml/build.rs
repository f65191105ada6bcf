//! Events to nodes: one stack of open collections, anchors kept for their aliases, merge
//! keys applied when their mapping ends.
//!
//! Aliases are copied in full, so one large value aliased many times (`args: [*big, *big,
//! ...]`) could make a 10 MiB manifest ask for terabytes. Copies are charged one per node
//! plus each string's length, and stop at twice the manifest's size plus 64 KiB: about
//! what the same manifest written out without aliases could hold, so `<<: *defaults`
//! stays usable but aliases never make a manifest bigger than the size cap (S8) allows.

use std::collections::HashMap;

use granit_parser::{Event, Parser, ScalarStyle, Span, StrInput, Tag as EventTag};

use super::resolve::{self, Scalar, Tag};
use super::{Entry, Error, Failure, Node, Position, Value};

/// The deepest nesting of collections accepted; pod manifests need a dozen levels.
pub(in crate::manifest) const MAX_DEPTH: usize = 100;

pub(in crate::manifest) const EXCEEDED: &str = "aliases expand the manifest to more than twice its size; \
write the repeated values out instead of aliasing them";

/// The alias expansion allowed for a manifest of `size` bytes.
fn expansion_limit(size: usize) -> usize {
    size.saturating_mul(2).saturating_add(64 * 1024)
}

/// An open collection.
enum Open {
    Seq { at: Position, anchor: usize, items: Vec<Node> },
    Map { at: Position, anchor: usize, entries: Vec<Entry>, key: Option<Key>, merged: Vec<Node> },
}

/// A mapping's key waiting for its value.
enum Key {
    Name(String, Position),
    Merge(Position),
}

struct Builder {
    open: Vec<Open>,
    anchors: HashMap<usize, Node>,
    documents: Vec<Node>,
    document: Option<Node>,
    document_at: Position,
    budget: usize,
}

pub(super) fn documents<'a>(
    parser: Parser<'a, StrInput<'a>>,
    size: usize,
) -> Result<Vec<Node>, Failure> {
    let mut builder = Builder {
        open: Vec::new(),
        anchors: HashMap::new(),
        documents: Vec::new(),
        document: None,
        document_at: (1, 1),
        budget: expansion_limit(size),
    };
    for event in parser {
        let (event, span) = event.map_err(Failure::Scan)?;
        builder.event(event, span).map_err(Failure::Rule)?;
    }
    Ok(builder.documents)
}

fn position(span: &Span) -> Position {
    (span.start.line(), span.start.col() + 1)
}

impl Builder {
    fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), Error> {
        let at = position(&span);
        match event {
            Event::DocumentStart(..) => {
                self.document = None;
                self.document_at = at;
                self.anchors.clear();
            }
            Event::DocumentEnd => {
                let root = self.document.take();
                self.documents
                    .push(root.unwrap_or(Node { value: Value::Null, at: self.document_at }));
            }
            Event::Scalar(text, style, anchor, tag) => {
                let merge = style == ScalarStyle::Plain && tag.is_none() && text == "<<"
                    || tag.as_deref().is_some_and(|t| core_tag(t).as_deref() == Some("merge"));
                if merge && self.awaits_key() {
                    return self.key(Key::Merge(at));
                }
                let value = scalar(&text, style, tag.as_deref())
                    .map_err(|e| Error { message: e.to_string(), at })?;
                self.finish(Node { value, at }, anchor)?;
            }
            Event::Alias(anchor) => {
                let Some(node) = self.anchors.get(&anchor) else {
                    return Err(Error { message: "alias of an unknown anchor".into(), at });
                };
                let cost = weight(node);
                if cost > self.budget {
                    return Err(Error { message: EXCEEDED.into(), at });
                }
                self.budget -= cost;
                let mut copy = node.clone();
                copy.at = at;
                self.finish(copy, 0)?;
            }
            Event::SequenceStart(_, anchor, _) => {
                self.deeper(at)?;
                self.open.push(Open::Seq { at, anchor, items: Vec::new() });
            }
            Event::MappingStart(_, anchor, _) => {
                self.deeper(at)?;
                self.open.push(Open::Map {
                    at,
                    anchor,
                    entries: Vec::new(),
                    key: None,
                    merged: Vec::new(),
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor) = match self.open.pop() {
                    Some(Open::Seq { at, anchor, items }) => {
                        (Node { value: Value::Seq(items), at }, anchor)
                    }
                    Some(Open::Map { at, anchor, entries, merged, .. }) => {
                        (Node { value: Value::Map(merge(entries, merged)), at }, anchor)
                    }
                    None => return Ok(()),
                };
                self.finish(node, anchor)?;
            }
            _ => {}
        }
        Ok(())
    }

    fn deeper(&self, at: Position) -> Result<(), Error> {
        if self.open.len() >= MAX_DEPTH {
            return Err(Error {
                message: format!(
                    "values nest more than {MAX_DEPTH} deep; a pod manifest needs a dozen levels at most"
                ),
                at,
            });
        }
        Ok(())
    }

    fn awaits_key(&self) -> bool {
        matches!(self.open.last(), Some(Open::Map { key: None, .. }))
    }

    fn key(&mut self, key: Key) -> Result<(), Error> {
        if let Some(Open::Map { key: slot, .. }) = self.open.last_mut() {
            *slot = Some(key);
        }
        Ok(())
    }

    /// A complete node: a document's root, an item, a key or a value.
    fn finish(&mut self, node: Node, anchor: usize) -> Result<(), Error> {
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.open.last_mut() {
            None => self.document = Some(node),
            Some(Open::Seq { items, .. }) => items.push(node),
            Some(Open::Map { entries, key, merged, .. }) => match key.take() {
                None => *key = Some(Key::Name(key_string(&node)?, node.at)),
                Some(Key::Merge(at)) => merged.push(merge_source(node, at)?),
                Some(Key::Name(name, at)) => {
                    if let Some(first) = entries.iter().find(|e| e.key == name) {
                        return Err(Error {
                            message: format!(
                                "mapping key {name:?} already defined at line {}; remove one of them",
                                first.at.0
                            ),
                            at,
                        });
                    }
                    entries.push(Entry { key: name, at, value: node });
                }
            },
        }
        Ok(())
    }
}

/// The tag's name in YAML's core namespace (`!!int` is `int`).
fn core_tag(tag: &EventTag) -> Option<String> {
    tag.suffix_in_namespace("tag:yaml.org,2002:").map(|suffix| suffix.into_owned())
}

fn scalar(text: &str, style: ScalarStyle, tag: Option<&EventTag>) -> Result<Value, resolve::Error> {
    let resolved = match tag {
        Some(tag) => {
            let tag = match core_tag(tag).as_deref() {
                Some("str") => Tag::Str,
                Some("int") => Tag::Int,
                Some("float") => Tag::Float,
                Some("bool") => Tag::Bool,
                Some("null") => Tag::Null,
                _ => Tag::Other,
            };
            resolve::tagged(text, tag)?
        }
        None if style == ScalarStyle::Plain => resolve::plain(text),
        None => Scalar::Str,
    };
    Ok(match resolved {
        Scalar::Null => Value::Null,
        Scalar::Bool(b) => Value::Bool(b),
        Scalar::Int(i) => Value::Int(i),
        Scalar::Uint(u) => Value::Uint(u),
        Scalar::Float(f) => Value::Float(f),
        Scalar::Str => Value::Str(text.to_owned()),
    })
}

/// A key as sigs.k8s.io/yaml writes it into JSON: numbers and booleans in their text.
fn key_string(node: &Node) -> Result<String, Error> {
    Ok(match &node.value {
        Value::Str(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Float(f) if f.is_nan() => ".nan".into(),
        Value::Float(f) if f.is_infinite() => if *f > 0.0 { ".inf" } else { "-.inf" }.into(),
        Value::Float(f) => (*f as f32).to_string(),
        Value::Null | Value::Seq(_) | Value::Map(_) => {
            return Err(Error {
                message: "a mapping key must be a string, a number or a boolean".into(),
                at: node.at,
            });
        }
    })
}

/// A merge key's value: a mapping, or a sequence of mappings.
fn merge_source(node: Node, at: Position) -> Result<Node, Error> {
    let fits = match &node.value {
        Value::Map(_) => true,
        Value::Seq(items) => items.iter().all(|item| matches!(item.value, Value::Map(_))),
        _ => false,
    };
    if fits {
        Ok(node)
    } else {
        Err(Error {
            message: "a merge key (<<) takes a mapping or a sequence of mappings to merge".into(),
            at,
        })
    }
}

/// The mapping's own keys, then each merged key it does not write itself (the first
/// mapping to merge it wins).
fn merge(mut entries: Vec<Entry>, merged: Vec<Node>) -> Vec<Entry> {
    for source in merged {
        let maps = match source.value {
            Value::Map(entries) => vec![entries],
            Value::Seq(items) => items
                .into_iter()
                .filter_map(|item| match item.value {
                    Value::Map(entries) => Some(entries),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        for entry in maps.into_iter().flatten() {
            if !entries.iter().any(|e| e.key == entry.key) {
                entries.push(entry);
            }
        }
    }
    entries
}

/// What copying a node costs: one per node, plus each string's length.
fn weight(node: &Node) -> usize {
    1 + match &node.value {
        Value::Str(s) => s.len(),
        Value::Seq(items) => items.iter().map(weight).sum(),
        Value::Map(entries) => entries.iter().map(|e| e.key.len() + weight(&e.value)).sum(),
        _ => 0,
    }
}
