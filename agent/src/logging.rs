//! The agent's own logs: `tracing`, human-readable text or JSON, always on stderr (stdout
//! belongs to command output such as `--dry-run` deltas). The filter comes from
//! `OUTPOST_LOG` (tracing's EnvFilter syntax), default `info`.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

pub fn init(format: Option<LogFormat>) {
    let filter = EnvFilter::try_from_env("OUTPOST_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    // A second init (tests) keeps the first subscriber.
    let _ = match format.unwrap_or(LogFormat::Text) {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).try_init(),
    };
}
