//! `/metrics/resource` from a summary, as kubelet's resource metrics collector writes it:
//! the node's, each pod's and each container's cumulative CPU and working set (and swap
//! where read), each sample stamped with the time its figure was read; the containers'
//! start times; and `resource_scrape_error` (with its deprecated twin `scrape_error`),
//! 1 when the reading failed. Pure.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::exposition::{Family, Kind};
use super::summary::Summary;

/// Unix milliseconds of a figure's time.
pub fn millis(time: &Time) -> i64 {
    time.0.as_millisecond()
}

/// The resource metrics of `summary`; `failed` sets the scrape error.
pub fn families(summary: &Summary, failed: bool) -> Vec<Family> {
    let mut node_cpu = Family::new(
        "node_cpu_usage_seconds_total",
        "Cumulative cpu time consumed by the node in core-seconds",
        Kind::Counter,
    );
    let mut node_memory = Family::new(
        "node_memory_working_set_bytes",
        "Current working set of the node in bytes",
        Kind::Gauge,
    );
    let mut node_swap = Family::new(
        "node_swap_usage_bytes",
        "Current swap usage of the node in bytes. Reported only on non-windows systems",
        Kind::Gauge,
    );
    let mut start = Family::new(
        "container_start_time_seconds",
        "Start time of the container since unix epoch in seconds",
        Kind::Gauge,
    );
    let mut container_cpu = Family::new(
        "container_cpu_usage_seconds_total",
        "Cumulative cpu time consumed by the container in core-seconds",
        Kind::Counter,
    );
    let mut container_memory = Family::new(
        "container_memory_working_set_bytes",
        "Current working set of the container in bytes",
        Kind::Gauge,
    );
    let mut container_swap = Family::new(
        "container_swap_usage_bytes",
        "Current amount of the container swap usage in bytes. Reported only on non-windows systems",
        Kind::Gauge,
    );
    let mut pod_cpu = Family::new(
        "pod_cpu_usage_seconds_total",
        "Cumulative cpu time consumed by the pod in core-seconds",
        Kind::Counter,
    );
    let mut pod_memory = Family::new(
        "pod_memory_working_set_bytes",
        "Current working set of the pod in bytes",
        Kind::Gauge,
    );
    let mut pod_swap = Family::new(
        "pod_swap_usage_bytes",
        "Current amount of the pod swap usage in bytes. Reported only on non-windows systems",
        Kind::Gauge,
    );
    let node = &summary.node;
    if let Some(cpu) = &node.cpu
        && let Some(ns) = cpu.usage_core_nano_seconds
    {
        node_cpu.push(Vec::new(), ns as f64 / 1e9, Some(millis(&cpu.time)));
    }
    if let Some(memory) = &node.memory
        && let Some(bytes) = memory.working_set_bytes
    {
        node_memory.push(Vec::new(), bytes as f64, Some(millis(&memory.time)));
        if let Some(swap) = node.swap.as_ref().and_then(|s| s.swap_usage_bytes) {
            node_swap.push(Vec::new(), swap as f64, Some(millis(&memory.time)));
        }
    }
    for pod in &summary.pods {
        let (name, namespace) = (&pod.pod_ref.name, &pod.pod_ref.namespace);
        for container in &pod.containers {
            let labels = || {
                vec![
                    ("container", container.name.clone()),
                    ("pod", name.clone()),
                    ("namespace", namespace.clone()),
                ]
            };
            let started = container.start_time.0.as_millisecond();
            if started > 0 {
                start.push(labels(), started as f64 / 1e3, None);
            }
            if let Some(cpu) = &container.cpu
                && let Some(ns) = cpu.usage_core_nano_seconds
            {
                container_cpu.push(labels(), ns as f64 / 1e9, Some(millis(&cpu.time)));
            }
            if let Some(memory) = &container.memory
                && let Some(bytes) = memory.working_set_bytes
            {
                container_memory.push(labels(), bytes as f64, Some(millis(&memory.time)));
            }
            if let Some(swap) = &container.swap
                && let Some(bytes) = swap.swap_usage_bytes
            {
                container_swap.push(labels(), bytes as f64, Some(millis(&swap.time)));
            }
        }
        let labels = || vec![("pod", name.clone()), ("namespace", namespace.clone())];
        if let Some(cpu) = &pod.cpu
            && let Some(ns) = cpu.usage_core_nano_seconds
        {
            pod_cpu.push(labels(), ns as f64 / 1e9, Some(millis(&cpu.time)));
        }
        if let Some(memory) = &pod.memory
            && let Some(bytes) = memory.working_set_bytes
        {
            pod_memory.push(labels(), bytes as f64, Some(millis(&memory.time)));
        }
        if let Some(swap) = &pod.swap
            && let Some(bytes) = swap.swap_usage_bytes
        {
            pod_swap.push(labels(), bytes as f64, Some(millis(&swap.time)));
        }
    }
    let error = f64::from(u8::from(failed));
    let mut scrape_error = Family::new(
        "scrape_error",
        "1 if there was an error while getting container metrics, 0 otherwise",
        Kind::Gauge,
    );
    scrape_error.push(Vec::new(), error, None);
    let mut resource_scrape_error = Family::new(
        "resource_scrape_error",
        "1 if there was an error while getting container metrics, 0 otherwise",
        Kind::Gauge,
    );
    resource_scrape_error.push(Vec::new(), error, None);
    vec![
        container_cpu,
        container_memory,
        start,
        container_swap,
        node_cpu,
        node_memory,
        node_swap,
        pod_cpu,
        pod_memory,
        pod_swap,
        resource_scrape_error,
        scrape_error,
    ]
}
