//! Samples → statistics → `report.json` and a table.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

/// min, p50, p99, max of a sample (nearest-rank percentiles).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Stats {
    pub samples: usize,
    pub min: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Stats {
    pub fn of(mut values: Vec<f64>) -> Stats {
        values.sort_by(f64::total_cmp);
        let at = |p: f64| {
            if values.is_empty() {
                return f64::NAN;
            }
            // Nearest rank: the smallest value with at least p of the sample at or below it.
            let rank = (p * values.len() as f64).ceil() as usize;
            // Three decimals are below any unit's noise and keep the JSON readable.
            (values[rank.clamp(1, values.len()) - 1] * 1000.0).round() / 1000.0
        };
        Stats { samples: values.len(), min: at(0.0), p50: at(0.50), p99: at(0.99), max: at(1.0) }
    }

    /// Durations in microseconds.
    pub fn micros(durations: &[Duration]) -> Stats {
        Stats::of(durations.iter().map(|d| d.as_secs_f64() * 1e6).collect())
    }

    /// Durations in milliseconds.
    pub fn millis(durations: &[Duration]) -> Stats {
        Stats::of(durations.iter().map(|d| d.as_secs_f64() * 1e3).collect())
    }
}

/// One benchmark's line in the report.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    pub id: &'static str,
    pub name: String,
    pub unit: &'static str,
    #[serde(flatten)]
    pub stats: Stats,
    pub target: String,
    pub met: bool,
    /// The baseline measured side by side in the same run (none for B1, B4, B7).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Stats>,
    /// p50 / baseline p50.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// A correctness failure found while measuring (e.g. a missed edit): fails the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Counts and settings that explain the figures (edits seen, backend...).
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub details: serde_json::Map<String, serde_json::Value>,
}

impl Entry {
    pub fn new(
        id: &'static str,
        name: impl Into<String>,
        unit: &'static str,
        stats: Stats,
    ) -> Entry {
        Entry {
            id,
            name: name.into(),
            unit,
            stats,
            target: String::new(),
            met: true,
            baseline: None,
            ratio: None,
            error: None,
            details: serde_json::Map::new(),
        }
    }

    /// Target: p99 strictly below `limit` (in the entry's unit).
    pub fn p99_below(mut self, limit: f64, text: &str) -> Entry {
        self.target = text.to_owned();
        self.met = self.stats.p99 < limit;
        self
    }

    /// Target: p50 at least `floor` (throughputs).
    pub fn p50_at_least(mut self, floor: f64, text: &str) -> Entry {
        self.target = text.to_owned();
        self.met = self.stats.p50 >= floor;
        self
    }

    /// Target: p50 at most `max_ratio` × the p50 of `baseline`, measured in the same run.
    pub fn against(self, baseline: Stats, max_ratio: f64, text: &str) -> Entry {
        let mut entry = self.beside(baseline);
        entry.target = text.to_owned();
        entry.met = entry.ratio.is_some_and(|ratio| ratio <= max_ratio);
        entry
    }

    /// The baseline measured side by side, and p50 / its p50, shown beside a target that
    /// is not a ratio (e.g. an absolute bound already set).
    pub fn beside(mut self, baseline: Stats) -> Entry {
        self.ratio = Some((self.stats.p50 / baseline.p50 * 1000.0).round() / 1000.0);
        self.baseline = Some(baseline);
        self
    }

    /// A target that is not a bound on the sample (e.g. "zero missed edits").
    pub fn target(mut self, text: &str, met: bool) -> Entry {
        self.target = text.to_owned();
        self.met = met;
        self
    }

    /// Marks the benchmark as failed: what it measured is wrong, not slow.
    pub fn error(mut self, error: String) -> Entry {
        self.met = false;
        self.error = Some(error);
        self
    }

    pub fn detail(mut self, key: &str, value: impl Into<serde_json::Value>) -> Entry {
        self.details.insert(key.to_owned(), value.into());
        self
    }
}

pub fn write(path: &Path, entries: &[Entry]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut json = serde_json::to_string_pretty(entries)?;
    json.push('\n');
    std::fs::write(path, json).with_context(|| format!("cannot write {}", path.display()))
}

/// The human table (a side-by-side entry shows its baseline's p50 and the ratio).
pub fn table(entries: &[Entry]) -> String {
    let header = [
        "id",
        "benchmark",
        "unit",
        "n",
        "min",
        "p50",
        "p99",
        "max",
        "base p50",
        "ratio",
        "target",
        "met",
    ];
    let rows: Vec<[String; 12]> = entries
        .iter()
        .map(|e| {
            [
                e.id.to_owned(),
                e.name.clone(),
                e.unit.to_owned(),
                e.stats.samples.to_string(),
                number(e.stats.min),
                number(e.stats.p50),
                number(e.stats.p99),
                number(e.stats.max),
                e.baseline.map_or_else(|| "-".to_owned(), |b| number(b.p50)),
                e.ratio.map_or_else(|| "-".to_owned(), |r| format!("{r:.2}")),
                e.target.clone(),
                match (&e.error, e.met) {
                    (Some(_), _) => "ERROR",
                    (None, true) => "yes",
                    (None, false) => "NO",
                }
                .to_owned(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[String]| {
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            // Text columns left-aligned, numbers right-aligned.
            let _ = if matches!(i, 0..=2 | 10 | 11) {
                write!(out, "{cell:<w$}  ")
            } else {
                write!(out, "{cell:>w$}  ")
            };
        }
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
        out.push('\n');
    };
    line(&header.map(str::to_owned));
    for row in &rows {
        line(row);
    }
    for e in entries.iter().filter(|e| !e.details.is_empty()) {
        let details: Vec<String> = e.details.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(out, "  {} {}: {}", e.id, e.name, details.join(", "));
    }
    out
}

/// Three significant figures or so, without exponents.
fn number(value: f64) -> String {
    if !value.is_finite() {
        return "-".to_owned();
    }
    let magnitude = value.abs();
    if magnitude >= 1000.0 {
        let int = value.round() as i64;
        // Thousands separators make deltas/s readable.
        let digits = int.abs().to_string();
        let mut grouped = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                grouped.push(',');
            }
            grouped.push(c);
        }
        if int < 0 { format!("-{grouped}") } else { grouped }
    } else if magnitude >= 100.0 {
        format!("{value:.0}")
    } else if magnitude >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}
