//! One module per `outpost` subcommand; `main.rs` only dispatches here.

pub mod client;
pub mod container_log;
pub mod debug;
pub mod describe;
pub mod exec;
pub mod images;
pub mod join;
pub mod logs;
pub mod manifests;
pub mod pods;
pub mod printers;
pub mod run;
pub mod status;
pub mod validate;
