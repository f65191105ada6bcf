//! The Outpost node agent as a library; `main.rs` only parses arguments and starts it.

pub mod source;
