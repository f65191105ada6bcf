//! One module per `outpost` subcommand; `main.rs` only dispatches here.

pub mod run;
pub mod validate;
