//! YAML (and JSON, which is YAML too) to a tree of nodes that keep their line and column,
//! read as kubelet reads a manifest (S12): go-yaml's resolver for scalars ([`resolve`]),
//! merge keys applied, a repeated key an error, map keys made strings as
//! sigs.k8s.io/yaml makes them for JSON.
//!
//! The parser is granit-parser, the pure-Rust parser under serde-saphyr. What go-yaml
//! accepts beyond it is mended here: the `\'` escape of double-quoted scalars. Limits the
//! parser leaves open are kept here: alias expansion (see [`build`]) and block nesting.

use std::fmt;

use granit_parser::{ErrorKind, Parser, ScanError};

mod build;
pub(super) mod resolve;

/// The 1-based line and column (in characters) of a node.
pub(super) type Position = (usize, usize);

/// A node of a document and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Node {
    pub(super) value: Value,
    pub(super) at: Position,
}

/// What a node holds, as go-yaml hands it to JSON.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<Entry>),
}

/// A key of a mapping (made a string) and its value.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Entry {
    pub(super) key: String,
    /// Where the key is written.
    pub(super) at: Position,
    pub(super) value: Node,
}

impl Node {
    /// A JSON value as a node; every part of it is at `at` (JSON from a program, not a
    /// file someone edits).
    pub(super) fn from_json(value: &serde_json::Value, at: Position) -> Node {
        use serde_json::Value as Json;
        let value = match value {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => Value::Int(i),
                (_, Some(u), _) => Value::Uint(u),
                (_, _, f) => Value::Float(f.unwrap_or(f64::NAN)),
            },
            Json::String(s) => Value::Str(s.clone()),
            Json::Array(items) => {
                Value::Seq(items.iter().map(|i| Node::from_json(i, at)).collect())
            }
            Json::Object(fields) => Value::Map(
                fields
                    .iter()
                    .map(|(key, value)| Entry {
                        key: key.clone(),
                        at,
                        value: Node::from_json(value, at),
                    })
                    .collect(),
            ),
        };
        Node { value, at }
    }

    /// The value of `key` in a mapping.
    pub(super) fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Map(entries) => entries.iter().find(|e| e.key == key).map(|e| &e.value),
            _ => None,
        }
    }

    /// Where the field at `path` is written (`items[2].spec.containers[0].image`): the
    /// key's position for a mapping's field, the item's for a list's, or that of the
    /// deepest part of the path the document has (a missing field points at its parent).
    pub(super) fn position_of(&self, path: &str) -> Position {
        let mut node = self;
        let mut at = self.at;
        for segment in segments(path) {
            let next = match (&node.value, segment) {
                (Value::Map(entries), Segment::Key(key)) => {
                    entries.iter().find(|e| e.key == key).map(|e| (e.at, &e.value))
                }
                (Value::Seq(items), Segment::Index(i)) => items.get(i).map(|n| (n.at, n)),
                _ => None,
            };
            let Some((position, child)) = next else { break };
            at = position;
            node = child;
        }
        at
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

/// A field path's parts: `a.b[2].c` is `a`, `b`, 2, `c`; a bracket that holds no number
/// holds a key (`annotations[example.com/x]`).
fn segments(path: &str) -> Vec<Segment<'_>> {
    let mut parts = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(inner) = rest.strip_prefix('[') {
            let end = inner.find(']').unwrap_or(inner.len());
            let text = &inner[..end];
            parts.push(text.parse().map_or(Segment::Key(text), Segment::Index));
            rest = inner.get(end + 1..).unwrap_or_default();
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            if end > 0 {
                parts.push(Segment::Key(&rest[..end]));
            }
            rest = &rest[end..];
        }
        rest = rest.strip_prefix('.').unwrap_or(rest);
    }
    parts
}

/// Why a text is not a YAML stream kubelet would read.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Error {
    pub(super) message: String,
    pub(super) at: Position,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Every document of the stream, in order; an empty one (`---` alone, only comments) is
/// a null node.
pub(super) fn load(text: &str) -> Result<Vec<Node>, Error> {
    match load_as_written(text) {
        Err(failure) => mend_escapes(text, failure),
        Ok(documents) => Ok(documents),
    }
}

fn load_as_written(text: &str) -> Result<Vec<Node>, Failure> {
    let parser = Parser::new_from_str(text);
    build::documents(parser, text.len())
}

/// What stopped the loader: the parser, or a rule of this module.
#[derive(Debug)]
pub(super) enum Failure {
    Scan(ScanError),
    Rule(Error),
}

impl Failure {
    fn into_error(self) -> Error {
        match self {
            Failure::Rule(error) => error,
            Failure::Scan(error) => {
                let mark = error.marker();
                Error { message: error.info(), at: (mark.line(), mark.col() + 1) }
            }
        }
    }
}

/// go-yaml takes `\'` in a double-quoted scalar as `'`; YAML 1.2, and so the parser, does
/// not. Where the parser stops at such an escape, it is written as an escape the text
/// does not use and read again; that character is then put back as `'`.
fn mend_escapes(text: &str, failure: Failure) -> Result<Vec<Node>, Error> {
    let stand_in = [('a', '\u{7}'), ('e', '\u{1b}'), ('v', '\u{b}'), ('f', '\u{c}')]
        .into_iter()
        .find(|(escape, raw)| !text.contains(&format!("\\{escape}")) && !text.contains(*raw));
    let Some((escape, raw)) = stand_in else {
        return Err(failure.into_error());
    };
    let mut mended = text.to_owned();
    let mut failure = failure;
    while let Failure::Scan(error) = &failure {
        if *error.kind() != ErrorKind::UnknownQuotedScalarEscape {
            break;
        }
        // The parser points at the scalar's opening quote; its first escape that YAML
        // does not know is the one it stopped at.
        let index = error.marker().index();
        let offset = error.marker().byte_offset().unwrap_or_else(|| {
            mended.char_indices().nth(index).map_or(mended.len(), |(offset, _)| offset)
        });
        let Some(escape_at) = unknown_escape(&mended, offset) else { break };
        if mended.get(escape_at..escape_at + 2) != Some("\\'") {
            break;
        }
        mended.replace_range(escape_at + 1..escape_at + 2, &escape.to_string());
        match load_as_written(&mended) {
            Ok(mut documents) => {
                for document in &mut documents {
                    put_back(document, raw);
                }
                return Ok(documents);
            }
            Err(next) => failure = next,
        }
    }
    Err(failure.into_error())
}

/// The offset of the first escape YAML does not know in the double-quoted scalar that
/// opens at `quote`.
fn unknown_escape(text: &str, quote: usize) -> Option<usize> {
    let mut chars = text.get(quote..)?.char_indices().skip(1);
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => return None,
            '\\' => {
                let (_, escaped) = chars.next()?;
                if !"0abt\tnvfre \"/\\N_LPxuU\n\r".contains(escaped) {
                    return Some(quote + at);
                }
            }
            _ => {}
        }
    }
    None
}

fn put_back(node: &mut Node, raw: char) {
    match &mut node.value {
        Value::Str(text) if text.contains(raw) => *text = text.replace(raw, "'"),
        Value::Seq(items) => items.iter_mut().for_each(|item| put_back(item, raw)),
        Value::Map(entries) => {
            for entry in entries {
                if entry.key.contains(raw) {
                    entry.key = entry.key.replace(raw, "'");
                }
                put_back(&mut entry.value, raw);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
