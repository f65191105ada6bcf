//! L1's entries: the figures [`Measured`] holds, against the targets in `l1_load`'s
//! documentation.

use std::collections::BTreeMap;
use std::time::Duration;

use super::client::{self, Kind};
use super::{
    CLOSE_EVERY, Measured, POOL, RATE, STALL, STREAMS, TARGET_FD_DRIFT, TARGET_HEALTHZ_P99_MS,
    TARGET_RATE_SHARE, TARGET_RSS_GROWTH_MIB, TARGET_WARM_GROWTH_MIB,
};
use crate::report::{Entry, Stats};

impl Measured {
    pub(super) fn entries(&self, duration: Duration) -> Vec<Entry> {
        let secs = duration.as_secs();
        let round = |v: f64| (v * 1000.0).round() / 1000.0;
        let d = &self.driven;
        let planned = u64::from(RATE) * secs;
        let answered = d.outcomes.iter().filter(|o| o.result.is_ok()).count();
        let achieved = answered as f64 / d.elapsed.as_secs_f64().max(f64::EPSILON);
        let rate = Entry::new(
            "L1",
            format!("load: achieved request rate over {secs} s (planned {RATE}/s)"),
            "req/s",
            Stats::of(vec![round(achieved)]),
        )
        .p50_at_least(TARGET_RATE_SHARE * f64::from(RATE), ">= 950/s")
        .detail("planned", planned)
        .detail("answered", answered as u64)
        .detail("connections_opened", d.connects as u64)
        .detail("retried_after_idle_close", d.retries as u64)
        .detail("pool", POOL as u64)
        .detail("new_connection_every", CLOSE_EVERY)
        .detail("agent_cpu_percent_of_a_core", round(self.cpu_percent));

        let latencies = |kind: Kind, f: fn(&client::Outcome) -> Duration| -> Vec<Duration> {
            d.outcomes.iter().filter(|o| o.kind == kind && o.result.is_ok()).map(f).collect()
        };
        let healthz = Stats::millis(&latencies(Kind::Healthz, |o| o.latency));
        let mut latency = Entry::new(
            "L1",
            format!("load: /healthz latency under load, {STREAMS} log streams"),
            "ms",
            healthz,
        )
        .p99_below(TARGET_HEALTHZ_P99_MS, "p99 < 50 ms");
        let service = Stats::millis(&latencies(Kind::Healthz, |o| o.service));
        latency = latency
            .detail("healthz_service_p50_ms", service.p50)
            .detail("healthz_service_p99_ms", service.p99);
        for kind in [Kind::Pods, Kind::Metrics] {
            let stats = Stats::millis(&latencies(kind, |o| o.latency));
            let name = kind.path().trim_start_matches('/');
            latency = latency
                .detail(&format!("{name}_p50_ms"), stats.p50)
                .detail(&format!("{name}_p99_ms"), stats.p99)
                .detail(&format!("{name}_max_ms"), stats.max);
        }

        let mut statuses: BTreeMap<String, u64> = BTreeMap::new();
        let mut failures: BTreeMap<String, u64> = BTreeMap::new();
        for outcome in &d.outcomes {
            match &outcome.result {
                Ok(status) if (200..300).contains(status) => {}
                Ok(status) => {
                    *statuses.entry(format!("{} {status}", outcome.kind.path())).or_default() += 1
                }
                // The message without the OS error's details, so that alike ones add up.
                Err(e) => {
                    *failures
                        .entry(e.split(" (os error").next().unwrap_or(e).to_owned())
                        .or_default() += 1
                }
            }
        }
        let errors =
            statuses.values().sum::<u64>() + failures.values().sum::<u64>() + d.unanswered as u64;
        let describe = |m: &BTreeMap<String, u64>| {
            m.iter().map(|(k, n)| format!("{k}: {n}")).collect::<Vec<_>>().join("; ")
        };
        let error_entry = Entry::new(
            "L1",
            "load: failed requests (non-2xx, connection failures, timeouts, unanswered)",
            "requests",
            Stats::of(vec![errors as f64]),
        )
        .target("0", errors == 0)
        .detail("non_2xx", describe(&statuses))
        .detail("failures", describe(&failures))
        .detail("unanswered", d.unanswered as u64)
        .detail("agent_log_lines", self.log_lines as u64)
        .detail("agent_warnings", self.warnings as u64);

        let held = self.streams.iter().filter(|s| s.result.is_ok()).count();
        let live = self
            .streams
            .iter()
            .filter(|s| s.result.is_ok() && s.quiet_at_stop.is_some_and(|q| q < STALL))
            .count();
        let broken: Vec<String> = self
            .streams
            .iter()
            .filter_map(|s| s.result.as_ref().err().map(|e| format!("{}: {e}", s.path)))
            .take(3)
            .collect();
        let bytes: u64 = self.streams.iter().map(|s| s.bytes).sum();
        // The least a stream of each kind received: the whole-log ones start with the
        // backlog, the tail ones with 10 lines.
        let least = |whole: bool| {
            let of_kind = self.streams.iter().filter(|s| s.path.contains("tailLines") != whole);
            of_kind.map(|s| s.bytes).min().unwrap_or(0)
        };
        let streams = Entry::new(
            "L1",
            format!(
                "load: follow streams held to the end with data in their last {} s",
                STALL.as_secs()
            ),
            "streams",
            Stats::of(vec![live as f64]),
        )
        .target(&format!("all {STREAMS}"), live == STREAMS)
        .detail("opened", STREAMS as u64)
        .detail("held", held as u64)
        .detail("log_bytes_received", bytes)
        .detail("pod_logs_mib_at_open", round(self.logs_mib))
        .detail("least_bytes_whole_log_stream", least(true))
        .detail("least_bytes_tail_stream", least(false))
        .detail("first_broken", broken.join("; "));

        let rss: Vec<f64> = self.samples.iter().map(|(_, r)| r.rss_mib).collect();
        let growth = round(self.end.rss_mib - self.start.rss_mib);
        // From a quarter into the load to its end: growth once warm (a leak keeps growing).
        let warm_at = self.load_began + duration / 4;
        let load_end = self.load_began + duration;
        let at = |t: Duration| {
            self.samples.iter().find(|(at, _)| *at >= t).map(|(_, r)| r.rss_mib).unwrap_or(f64::NAN)
        };
        let memory = Entry::new(
            "L1",
            "load: agent RSS growth, start → end (12 s after the load)",
            "MiB",
            Stats::of(vec![growth]),
        )
        .p99_below(TARGET_RSS_GROWTH_MIB, "< 5 MiB")
        .detail("start_mib", round(self.start.rss_mib))
        .detail("end_mib", round(self.end.rss_mib))
        .detail("peak_mib", round(rss.iter().copied().fold(f64::NAN, f64::max)));
        let warm_growth = round(at(load_end) - at(warm_at));
        let warm = Entry::new(
            "L1",
            "load: agent RSS growth once warm, a quarter into the load → its end",
            "MiB",
            Stats::of(vec![warm_growth]),
        )
        .p99_below(TARGET_WARM_GROWTH_MIB, "< 1 MiB (no growth with time)")
        .detail("over_s", (duration - duration / 4).as_secs());

        let fds: Vec<f64> = self.samples.iter().map(|(_, r)| r.fds as f64).collect();
        let drift = self.end.fds - self.start.fds;
        let fd_entry = Entry::new(
            "L1",
            "load: agent open file descriptors (samples over the run)",
            "fds",
            Stats::of(fds),
        )
        .target("end within start ± 5", drift.abs() <= TARGET_FD_DRIFT)
        .detail("start", self.start.fds)
        .detail("end", self.end.fds)
        .detail("drift", drift);
        vec![rate, latency, error_entry, streams, memory, warm, fd_entry]
    }
}
