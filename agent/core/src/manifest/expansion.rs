//! A bound on YAML alias expansion.
//!
//! serde_yaml_ng stops "billion laughs" (aliases of aliases) with its repetition limit,
//! but not one large value aliased many times (`args: [*big, *big, ...]`): each alias
//! is copied in full, so a 10 MiB manifest could ask for terabytes. Before deserializing
//! a manifest that may hold aliases, this walks its documents with aliases followed and
//! counts one per node plus each scalar's length, and stops at twice the manifest's size
//! plus 64 KiB: about what the same manifest written out without aliases could hold, so
//! aliases (e.g. `<<: *defaults`) stay usable but never make a manifest bigger than the
//! size cap (S8) already allows.

use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};

/// The expansion allowed for a manifest of `size` bytes.
pub(super) fn limit(size: usize) -> usize {
    size.saturating_mul(2).saturating_add(64 * 1024)
}

/// Whether the text may hold aliases at all (an alias is written `*name`).
pub(super) fn may_alias(text: &str) -> bool {
    text.contains('*')
}

/// What is left to spend of the manifest's expansion limit.
#[derive(Debug)]
pub(super) struct Budget {
    remaining: usize,
    exceeded: bool,
}

impl Budget {
    pub(super) fn new(limit: usize) -> Budget {
        Budget { remaining: limit, exceeded: false }
    }

    /// Walks one document. `Err(message)` only when the budget ran out; any other error
    /// (a type error, the parser's own limits) is left for the real deserialization.
    pub(super) fn walk(
        &mut self,
        document: serde_yaml_ng::Deserializer<'_>,
    ) -> Result<(), serde_yaml_ng::Error> {
        match Walk(self).deserialize(document) {
            Err(error) if self.exceeded => Err(error),
            _ => Ok(()),
        }
    }
}

pub(super) const EXCEEDED: &str = "aliases expand the manifest to more than twice its size; \
write the repeated values out instead of aliasing them";

/// Visits every node, aliases followed, charging the budget.
struct Walk<'b>(&'b mut Budget);

impl Walk<'_> {
    fn charge<E: de::Error>(&mut self, cost: usize) -> Result<(), E> {
        match self.0.remaining.checked_sub(cost) {
            Some(remaining) => {
                self.0.remaining = remaining;
                Ok(())
            }
            None => {
                self.0.exceeded = true;
                Err(E::custom(EXCEEDED))
            }
        }
    }

    fn again(&mut self) -> Walk<'_> {
        Walk(self.0)
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(mut self, _: bool) -> Result<(), E> {
        self.charge(1)
    }

    fn visit_i64<E: de::Error>(mut self, _: i64) -> Result<(), E> {
        self.charge(1)
    }

    fn visit_i128<E: de::Error>(mut self, _: i128) -> Result<(), E> {
        self.charge(1)
    }

    fn visit_u64<E: de::Error>(mut self, _: u64) -> Result<(), E> {
        self.charge(1)
    }

    fn visit_u128<E: de::Error>(mut self, _: u128) -> Result<(), E> {
        self.charge(1)
    }

    fn visit_f64<E: de::Error>(mut self, _: f64) -> Result<(), E> {
        self.charge(1)
    }

    fn visit_str<E: de::Error>(mut self, value: &str) -> Result<(), E> {
        self.charge(value.len().saturating_add(1))
    }

    fn visit_unit<E: de::Error>(mut self) -> Result<(), E> {
        self.charge(1)
    }

    fn visit_none<E: de::Error>(mut self) -> Result<(), E> {
        self.charge(1)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        self.charge(1)?;
        while seq.next_element_seed(self.again())?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        self.charge(1)?;
        while map.next_key_seed(self.again())?.is_some() {
            map.next_value_seed(self.again())?;
        }
        Ok(())
    }

    /// A value with a custom tag (`!tag value`).
    fn visit_enum<A: EnumAccess<'de>>(mut self, data: A) -> Result<(), A::Error> {
        self.charge(1)?;
        let ((), variant) = data.variant_seed(self.again())?;
        variant.newtype_variant_seed(self)
    }
}
