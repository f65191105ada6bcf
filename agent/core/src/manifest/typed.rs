//! Nodes to typed values (the pod), as kubelet decodes the JSON go-yaml made: a string
//! field takes only a string, a number only a number (an integral float is an integer,
//! as Go writes it in JSON), and a type that reads numbers itself (a `Quantity`, an
//! `IntOrString`) gets them.
//!
//! Every key a struct does not know is collected with its path, its position and, when
//! a known name is close, a suggestion (S12). A type error names its field's path and
//! points at its node.

use std::cell::RefCell;
use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor,
};

use super::yaml::{Entry, Node, Position, Value};

/// A key the target type does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Unknown {
    /// The full path of the key (`spec.containers[0].livenessProbe.periodSecondz`).
    pub(super) field: String,
    pub(super) at: Position,
    /// The closest known name, if one is close.
    pub(super) suggestion: Option<&'static str>,
}

/// A decoding error: its message, and the path and position of the node it concerns.
#[derive(Debug)]
pub(super) struct Error {
    pub(super) message: String,
    pub(super) located: Option<(String, Position)>,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.located {
            Some((path, _)) if !path.is_empty() => write!(f, "{path}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(message: T) -> Error {
        Error { message: message.to_string(), located: None }
    }
}

/// Decodes `node` as a `T`; `prefix` is the path of the node in its document (`items[2]`).
pub(super) fn decode<'n, T: de::Deserialize<'n>>(
    node: &'n Node,
    prefix: &str,
) -> (Result<T, Error>, Vec<Unknown>) {
    let unknown = RefCell::new(Vec::new());
    let path = if prefix.is_empty() { Path::Root } else { Path::Prefix(prefix) };
    let result = T::deserialize(NodeDeserializer { node, path, unknown: &unknown });
    (result, unknown.into_inner())
}

/// Where a node is: a linked list up to the document's root.
#[derive(Clone, Copy)]
enum Path<'p> {
    Root,
    Prefix(&'p str),
    Key(&'p Path<'p>, &'p str),
    Index(&'p Path<'p>, usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Prefix(prefix) => f.write_str(prefix),
            Path::Key(parent, key) => match parent {
                Path::Root => f.write_str(key),
                _ => write!(f, "{parent}.{key}"),
            },
            Path::Index(parent, index) => write!(f, "{parent}[{index}]"),
        }
    }
}

struct NodeDeserializer<'n, 'p> {
    node: &'n Node,
    path: Path<'p>,
    unknown: &'p RefCell<Vec<Unknown>>,
}

impl<'n> NodeDeserializer<'n, '_> {
    /// Gives an error without a place this node's.
    fn locate(&self, mut error: Error) -> Error {
        if error.located.is_none() {
            error.located = Some((self.path.to_string(), self.node.at));
        }
        error
    }

    fn entries<'s>(
        &'s self,
        entries: &'n [Entry],
        known: Option<&'static [&'static str]>,
    ) -> Entries<'n, 's> {
        Entries {
            entries: entries.iter(),
            value: None,
            path: &self.path,
            known,
            unknown: self.unknown,
        }
    }
}

impl<'de, 'p> Deserializer<'de> for NodeDeserializer<'de, 'p> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let result = match &self.node.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Int(i) => visitor.visit_i64(*i),
            Value::Uint(u) => visitor.visit_u64(*u),
            Value::Float(f) => float(*f, visitor),
            Value::Str(s) => visitor.visit_borrowed_str(s),
            Value::Seq(items) => visitor.visit_seq(Items {
                items: items.iter().enumerate(),
                path: &self.path,
                unknown: self.unknown,
            }),
            Value::Map(entries) => visitor.visit_map(self.entries(entries, None)),
        };
        result.map_err(|error| self.locate(error))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.node.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let result = match &self.node.value {
            Value::Map(entries) => visitor.visit_map(self.entries(entries, Some(fields))),
            // JSON's null decodes into a struct as nothing at all.
            Value::Null => visitor.visit_map(self.entries(&[], Some(fields))),
            _ => return self.deserialize_any(visitor),
        };
        result.map_err(|error| self.locate(error))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let result = match &self.node.value {
            Value::Str(s) => visitor.visit_enum(s.as_str().into_deserializer()),
            _ => Err(de::Error::invalid_type(unexpected(self.node), &"a string")),
        };
        result.map_err(|error| self.locate(error))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
        byte_buf unit unit_struct seq tuple tuple_struct map identifier
    }
}

/// A float as Go's JSON writes it: integral values below 1e21 as integers; NaN and the
/// infinities are not JSON at all.
fn float<'de, V: Visitor<'de>>(value: f64, visitor: V) -> Result<V::Value, Error> {
    if !value.is_finite() {
        return Err(de::Error::custom(format!(
            "{value} is not a JSON number; write a finite number or quote it"
        )));
    }
    if value.fract() == 0.0 && value.abs() < 1e21 {
        if value >= i64::MIN as f64 && value < i64::MAX as f64 {
            return visitor.visit_i64(value as i64);
        }
        if value >= 0.0 && value < u64::MAX as f64 {
            return visitor.visit_u64(value as u64);
        }
    }
    visitor.visit_f64(value)
}

fn unexpected(node: &Node) -> de::Unexpected<'_> {
    match &node.value {
        Value::Null => de::Unexpected::Unit,
        Value::Bool(b) => de::Unexpected::Bool(*b),
        Value::Int(i) => de::Unexpected::Signed(*i),
        Value::Uint(u) => de::Unexpected::Unsigned(*u),
        Value::Float(f) => de::Unexpected::Float(*f),
        Value::Str(s) => de::Unexpected::Str(s),
        Value::Seq(_) => de::Unexpected::Seq,
        Value::Map(_) => de::Unexpected::Map,
    }
}

struct Items<'n, 'p> {
    items: std::iter::Enumerate<std::slice::Iter<'n, Node>>,
    path: &'p Path<'p>,
    unknown: &'p RefCell<Vec<Unknown>>,
}

impl<'de, 'p> SeqAccess<'de> for Items<'de, 'p> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        let Some((index, node)) = self.items.next() else { return Ok(None) };
        let path = Path::Index(self.path, index);
        seed.deserialize(NodeDeserializer { node, path, unknown: self.unknown }).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct Entries<'n, 'p> {
    entries: std::slice::Iter<'n, Entry>,
    value: Option<&'n Entry>,
    path: &'p Path<'p>,
    /// The struct's fields; `None` for a map, whose keys are all its own.
    known: Option<&'static [&'static str]>,
    unknown: &'p RefCell<Vec<Unknown>>,
}

impl<'de, 'p> MapAccess<'de> for Entries<'de, 'p> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        for entry in self.entries.by_ref() {
            if let Some(known) = self.known
                && !known.contains(&entry.key.as_str())
            {
                self.unknown.borrow_mut().push(Unknown {
                    field: Path::Key(self.path, &entry.key).to_string(),
                    at: entry.at,
                    suggestion: suggest(&entry.key, known),
                });
                continue;
            }
            self.value = Some(entry);
            let key: de::value::BorrowedStrDeserializer<'de, Error> =
                de::value::BorrowedStrDeserializer::new(&entry.key);
            return seed.deserialize(key).map(Some);
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let Some(entry) = self.value.take() else {
            return Err(de::Error::custom("a value was asked for before its key"));
        };
        let path = Path::Key(self.path, &entry.key);
        seed.deserialize(NodeDeserializer { node: &entry.value, path, unknown: self.unknown })
    }
}

/// The known name closest to `key`, if it is close: the same letters in another case, or
/// a name a few edits away.
fn suggest(key: &str, known: &'static [&'static str]) -> Option<&'static str> {
    if let Some(same) = known.iter().find(|name| name.eq_ignore_ascii_case(key)) {
        return Some(same);
    }
    known
        .iter()
        .map(|name| (strsim::jaro_winkler(key, name), *name))
        .filter(|(score, _)| *score > 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| name)
}

#[cfg(test)]
mod tests;
