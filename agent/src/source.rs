//! Pod sources: each is a stream of [`SourceUpdate`]s (SEMANTICS.md S*, M*).

pub mod file;

pub use outpost_core::merge::{Op, SourceUpdate};
