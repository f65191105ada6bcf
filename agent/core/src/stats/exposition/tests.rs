use super::*;

#[test]
fn n2_families_are_written_in_kubelets_text_format() {
    let mut cpu = Family::new(
        "container_cpu_usage_seconds_total",
        "Cumulative cpu time consumed by the container in core-seconds",
        Kind::Counter,
    );
    cpu.push(
        vec![("container", "web".into()), ("pod", "p\"1".into()), ("namespace", "ns".into())],
        1.5,
        Some(1_700_000_000_123),
    );
    let empty = Family::new("pod_swap_usage_bytes", "none", Kind::Gauge);
    let mut error = Family::new("resource_scrape_error", "1 if\nerror", Kind::Gauge);
    error.push(Vec::new(), 0.0, None);
    let text = encode(&[cpu, empty, error]);
    assert_eq!(
        text,
        "# HELP container_cpu_usage_seconds_total Cumulative cpu time consumed by the container in core-seconds\n\
         # TYPE container_cpu_usage_seconds_total counter\n\
         container_cpu_usage_seconds_total{container=\"web\",pod=\"p\\\"1\",namespace=\"ns\"} 1.5 1700000000123\n\
         # HELP resource_scrape_error 1 if\\nerror\n\
         # TYPE resource_scrape_error gauge\n\
         resource_scrape_error 0\n"
    );
}

#[test]
fn n2_numbers_are_written_as_the_go_client_writes_them() {
    assert_eq!(number(3.0), "3");
    assert_eq!(number(0.25), "0.25");
    assert_eq!(number(f64::NAN), "NaN");
    assert_eq!(number(f64::INFINITY), "+Inf");
    assert_eq!(number(1e20), "100000000000000000000");
}
