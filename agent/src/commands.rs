//! One module per `outpost` subcommand; `main.rs` only dispatches here.

pub mod images;
pub mod run;
pub mod validate;
