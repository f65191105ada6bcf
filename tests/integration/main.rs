//! Outpost's integration and end-to-end tests: one test binary, one module per area.

mod cli;
mod file_source;
mod tidy;
