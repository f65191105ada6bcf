//! The standard process metrics (as every Prometheus client library exports them), read
//! from `/proc/self` at scrape time: `process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, `process_start_time_seconds`, `process_open_fds`,
//! `process_max_fds`, `process_threads`.
//!
//! Written here because no maintained crate exports them for prometheus-client (the
//! `metrics-process` crate serves the `metrics` facade, `prometheus`'s collector serves
//! that other client), and reading four small files is less than a dependency.
//! A file that cannot be read leaves its metrics out of that scrape.

use crate::host::proc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

/// The figures of `/proc/self/stat` the metrics need.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Stat {
    /// User plus system CPU time, in clock ticks.
    pub cpu_ticks: u64,
    pub threads: u64,
    /// Start time after boot, in clock ticks.
    pub start_ticks: u64,
    /// Resident set size, in pages.
    pub rss_pages: u64,
}

/// Parses `/proc/<pid>/stat`. The command name (field 2) is in parentheses and may
/// itself hold spaces and parentheses: fields are counted after its last `)`.
pub(super) fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    // Fields from 3 (state) on; `field(n)` is field n of proc(5), 1-based.
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(Stat {
        cpu_ticks: field(14)? + field(15)?,
        threads: field(20)?,
        start_ticks: field(22)?,
        rss_pages: field(24)?,
    })
}

/// The boot time (`btime`, Unix seconds) from `/proc/stat`.
pub(super) fn parse_boot_time(text: &str) -> Option<u64> {
    text.lines().find_map(|line| line.strip_prefix("btime ")?.trim().parse().ok())
}

/// The soft limit of open files from `/proc/<pid>/limits` (`None` if unlimited).
pub(super) fn parse_max_fds(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..].split_ascii_whitespace().next()?.parse().ok()
}

/// Reads `/proc/self` at each scrape.
#[derive(Debug)]
pub(super) struct Process {
    /// Clock ticks per second (`_SC_CLK_TCK`).
    ticks: f64,
    page_size: f64,
}

impl Default for Process {
    fn default() -> Process {
        use nix::unistd::{SysconfVar, sysconf};
        // Linux's values everywhere it runs, if sysconf does not answer.
        let ticks = sysconf(SysconfVar::CLK_TCK).ok().flatten().unwrap_or(100);
        let page_size = sysconf(SysconfVar::PAGE_SIZE).ok().flatten().unwrap_or(4096);
        Process { ticks: ticks as f64, page_size: page_size as f64 }
    }
}

impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(stat) = proc::own_stat().ok().as_deref().and_then(parse_stat) {
            ConstCounter::new(stat.cpu_ticks as f64 / self.ticks).encode(
                encoder.encode_descriptor(
                    "process_cpu",
                    "Total user and system CPU time spent in seconds",
                    Some(&Unit::Seconds),
                    MetricType::Counter,
                )?,
            )?;
            ConstGauge::new(stat.rss_pages as f64 * self.page_size).encode(
                encoder.encode_descriptor(
                    "process_resident_memory",
                    "Resident memory size in bytes",
                    Some(&Unit::Bytes),
                    MetricType::Gauge,
                )?,
            )?;
            ConstGauge::new(i64::try_from(stat.threads).unwrap_or(i64::MAX)).encode(
                encoder.encode_descriptor(
                    "process_threads",
                    "Number of OS threads in the process",
                    None,
                    MetricType::Gauge,
                )?,
            )?;
            if let Some(boot) = proc::kernel_stat().ok().as_deref().and_then(parse_boot_time) {
                let start = boot as f64 + stat.start_ticks as f64 / self.ticks;
                ConstGauge::new(start).encode(encoder.encode_descriptor(
                    "process_start_time",
                    "Start time of the process since the Unix epoch in seconds",
                    Some(&Unit::Seconds),
                    MetricType::Gauge,
                )?)?;
            }
        }
        if let Ok(open) = proc::own_open_fds() {
            ConstGauge::new(i64::try_from(open).unwrap_or(i64::MAX)).encode(
                encoder.encode_descriptor(
                    "process_open_fds",
                    "Number of open file descriptors",
                    None,
                    MetricType::Gauge,
                )?,
            )?;
        }
        if let Some(max) = proc::own_limits().ok().as_deref().and_then(parse_max_fds) {
            ConstGauge::new(i64::try_from(max).unwrap_or(i64::MAX)).encode(
                encoder.encode_descriptor(
                    "process_max_fds",
                    "Maximum number of open file descriptors",
                    None,
                    MetricType::Gauge,
                )?,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        // A command name with spaces and a parenthesis, as a process may name itself.
        let text = "4242 (out post) x) S 1 4242 4242 0 -1 4194560 1500 0 3 0 \
                    120 35 0 0 20 0 7 0 98765 123456789 2048 18446744073709551615 \
                    1 1 0 0 0 0 0 4096 17415 0 0 0 17 1 0 0 0 0 0\n";
        assert_eq!(
            parse_stat(text),
            Some(Stat { cpu_ticks: 155, threads: 7, start_ticks: 98765, rss_pages: 2048 })
        );
        assert_eq!(parse_stat("4242 (truncated"), None);
        assert_eq!(parse_stat("4242 (a) S 1 2"), None);
    }

    #[test]
    fn boot_time_and_fd_limit_are_found() {
        let stat = "cpu  1 2 3 4\nintr 5\nbtime 1700000000\nprocesses 99\n";
        assert_eq!(parse_boot_time(stat), Some(1_700_000_000));
        assert_eq!(parse_boot_time("cpu 1\n"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max cpu time              unlimited            unlimited            seconds   \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(parse_max_fds(limits), Some(1024));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(parse_max_fds(unlimited), None);
    }

    #[test]
    fn this_process_is_reported() {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(Process::default()));
        let text = super::super::render(&registry).unwrap();
        for family in [
            "# TYPE process_cpu_seconds counter",
            "# TYPE process_resident_memory_bytes gauge",
            "# TYPE process_start_time_seconds gauge",
            "# TYPE process_open_fds gauge",
            "# TYPE process_max_fds gauge",
            "# TYPE process_threads gauge",
        ] {
            assert!(text.lines().any(|l| l == family), "missing {family:?} in:\n{text}");
        }
        let value = |name: &str| -> f64 {
            let line = text.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap();
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        assert!(value("process_resident_memory_bytes") > 0.0);
        assert!(value("process_threads") >= 1.0);
        assert!(value("process_open_fds") >= 1.0);
        let now = k8s_openapi::jiff::Timestamp::now().as_second() as f64;
        let started = value("process_start_time_seconds");
        assert!(started > now - 86_400.0 * 365.0 && started <= now + 1.0, "{started}");
    }
}
