//! The agent's own logs: `tracing`, human-readable text or JSON, always on stderr (stdout
//! belongs to command output such as `--dry-run` deltas). The filter comes from
//! `OUTPOST_LOG` (tracing's EnvFilter syntax), default `info`.
//! An unparsable `OUTPOST_LOG` falls back to `info`. [`LogLevel`] replaces the filter
//! while the agent runs (the local API's `/debug/log-level`).

use std::io::IsTerminal;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, fmt, reload};

use crate::config::LogFormat;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "log filter {spec:?} is not valid (expected EnvFilter syntax such as `debug` or `outpost=debug,info`): {source}"
    )]
    Parse {
        spec: String,
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    #[error("cannot change the log filter: the agent's logger is not installed ({0})")]
    Reload(#[source] reload::Error),
}

/// kube's client logs every failed request at ERROR; the API source reports the same
/// failure, with its context, once per change. Unless asked for, kube's copy is off.
fn with_kube_rule(spec: &str) -> String {
    if spec.contains("kube_client") {
        spec.to_owned()
    } else {
        format!("{spec},kube_client::client::builder=off")
    }
}

/// Parses a filter the way the agent uses it (with the kube rule above).
pub fn parse(spec: &str) -> Result<EnvFilter, Error> {
    let spec = spec.trim();
    EnvFilter::try_new(with_kube_rule(spec))
        .map_err(|source| Error::Parse { spec: spec.to_owned(), source })
}

/// The running logger's filter: read it, or replace it.
#[derive(Debug, Clone)]
pub struct LogLevel {
    handle: reload::Handle<EnvFilter, Registry>,
}

impl LogLevel {
    /// The filter in force, in EnvFilter syntax.
    pub fn current(&self) -> Result<String, Error> {
        self.handle.with_current(ToString::to_string).map_err(Error::Reload)
    }

    /// Replaces the filter with `spec`; returns the new one.
    pub fn set(&self, spec: &str) -> Result<String, Error> {
        let filter = parse(spec)?;
        let text = filter.to_string();
        self.handle.reload(filter).map_err(Error::Reload)?;
        Ok(text)
    }
}

/// Installs the logger; returns the handle that changes its filter.
pub fn init(format: Option<LogFormat>) -> LogLevel {
    let spec = std::env::var("OUTPOST_LOG").unwrap_or_else(|_| "info".into());
    let filter = parse(&spec).unwrap_or_else(|_| EnvFilter::new(with_kube_rule("info")));
    let (filter, handle) = reload::Layer::new(filter);
    let registry = tracing_subscriber::registry().with(filter);
    // A second init (tests) keeps the first subscriber.
    let _ = match format.unwrap_or(LogFormat::Text) {
        LogFormat::Json => registry
            .with(fmt::layer().json().flatten_event(true).with_writer(std::io::stderr))
            .try_init(),
        LogFormat::Text => registry
            .with(
                fmt::layer()
                    .with_ansi(std::io::stderr().is_terminal())
                    .with_writer(std::io::stderr),
            )
            .try_init(),
    };
    LogLevel { handle }
}

/// A logger that is not installed and writes nothing, with the handle that changes its
/// filter: for a local API driven in-process (the fuzz harness), whose `/debug/log-level`
/// must not change the process's own logger. The handle fails once the returned
/// subscriber is dropped: keep it.
pub fn detached(spec: &str) -> Result<(LogLevel, impl tracing::Subscriber + Send + Sync), Error> {
    let (filter, handle) = reload::Layer::new(parse(spec)?);
    Ok((LogLevel { handle }, tracing_subscriber::registry().with(filter)))
}

#[cfg(test)]
mod tests;
