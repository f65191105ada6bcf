//! One module per `outpost` subcommand; `main.rs` only dispatches here.

pub mod container_log;
pub mod images;
pub mod logs;
pub mod run;
pub mod validate;
