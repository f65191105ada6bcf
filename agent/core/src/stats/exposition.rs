//! The Prometheus text format (version 0.0.4), as kubelet serves `/metrics/resource` and
//! `/metrics/cadvisor`: `# HELP` and `# TYPE` lines naming the series as sampled
//! (`container_cpu_usage_seconds_total`), then one line per sample with its labels, its
//! value and, where the figure was read at a known time, that time in milliseconds.
//! prometheus-client's encoder writes OpenMetrics without sample timestamps, which
//! metrics-server needs (it computes CPU rates between the readings' own times); this
//! writer is the small part of the format those paths use. Pure.

use std::fmt::Write as _;

/// The content type of [`encode`]'s output (kubelet's).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What a family counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
}

/// One sample: labels in order, value, and when it was read (Unix milliseconds).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
    pub timestamp_ms: Option<i64>,
}

/// A metric family: its full name (a counter's ends in `_total`), help and samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    pub samples: Vec<Sample>,
}

impl Family {
    pub fn new(name: &'static str, help: &'static str, kind: Kind) -> Family {
        Family { name, help, kind, samples: Vec::new() }
    }

    /// Adds a sample.
    pub fn push(&mut self, labels: Vec<(&'static str, String)>, value: f64, at: Option<i64>) {
        self.samples.push(Sample { labels, value, timestamp_ms: at });
    }
}

/// The families in the text format; a family without samples is left out, as
/// Prometheus's client leaves out a collector's empty families.
pub fn encode(families: &[Family]) -> String {
    let mut out = String::new();
    for family in families.iter().filter(|f| !f.samples.is_empty()) {
        let kind = match family.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        let _ = writeln!(out, "# HELP {} {}", family.name, escape_help(family.help));
        let _ = writeln!(out, "# TYPE {} {kind}", family.name);
        for sample in &family.samples {
            out.push_str(family.name);
            if !sample.labels.is_empty() {
                out.push('{');
                for (i, (key, value)) in sample.labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{key}=\"{}\"", escape_label(value));
                }
                out.push('}');
            }
            let _ = write!(out, " {}", number(sample.value));
            if let Some(ms) = sample.timestamp_ms {
                let _ = write!(out, " {ms}");
            }
            out.push('\n');
        }
    }
    out
}

/// A value as Prometheus's Go client writes it: integers without a fraction, the
/// specials as `NaN`, `+Inf`, `-Inf`.
fn number(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf".into() } else { "-Inf".into() }
    } else if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        format!("{value}")
    }
}

fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

fn escape_label(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests;
