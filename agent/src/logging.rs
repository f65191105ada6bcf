//! The agent's own logs: `tracing`, human-readable text or JSON, always on stderr (stdout
//! belongs to command output such as `--dry-run` deltas). The filter comes from
//! `OUTPOST_LOG` (tracing's EnvFilter syntax), default `info`.
//! An unparsable `OUTPOST_LOG` falls back to `info`.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

pub fn init(format: Option<LogFormat>) {
    let spec = std::env::var("OUTPOST_LOG").unwrap_or_else(|_| "info".into());
    // kube's client logs every failed request at ERROR; the API source reports the same
    // failure, with its context, once per change. Unless asked for, kube's copy is off.
    let spec = if spec.contains("kube_client") {
        spec
    } else {
        format!("{spec},kube_client::client::builder=off")
    };
    let filter = EnvFilter::try_new(&spec).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    // A second init (tests) keeps the first subscriber.
    let _ = match format.unwrap_or(LogFormat::Text) {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).try_init(),
    };
}
