//! `outpost describe NAMESPACE/POD`: one pod in detail, laid out as `kubectl describe
//! pod` does, from the local API (`/pods/{ns}/{name}` and its `/events`): identity and
//! Outpost's annotations (source, config hash, mirror), each container's image, state,
//! last state, readiness, restarts, limits and requests, ports and mounts, the
//! conditions, the QoS class, and the events.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::process::ExitCode;

use k8s_openapi::api::core::v1::{Container, ContainerState, ContainerStatus, Event, Pod, Probe};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use outpost_core::admission;
use outpost_core::pod::{CONFIG_HASH, CONFIG_MIRROR, CONFIG_SEEN, CONFIG_SOURCE};

use super::client::{self, Client, split_pod};
use super::printers::{age, table};
use crate::cli::DescribeArgs;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Client(#[from] client::Error),
    #[error("cannot write the description")]
    Output(#[source] io::Error),
}

/// Runs `outpost describe`; an unknown pod is an error (exit 1).
pub fn describe(args: &DescribeArgs) -> Result<ExitCode, Error> {
    let client = Client::new(&args.client)?;
    let (namespace, name) = split_pod(&args.pod);
    let (pod, events) = client::runtime()?.block_on(async {
        let pod: Pod = client.get_json(client.url(&["pods", namespace, name], &[])).await?;
        let events: k8s_openapi::List<Event> =
            client.get_json(client.url(&["pods", namespace, name, "events"], &[])).await?;
        Ok::<_, client::Error>((pod, events.items))
    })?;
    let text = render(&pod, &events, Timestamp::now());
    match io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(Error::Output(e)),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// Lines of `Label:  value`, the values of one level aligned.
#[derive(Debug, Default)]
struct Section {
    out: String,
}

impl Section {
    /// `label:` padded to `width` at `indent` spaces, then `value`.
    fn field(&mut self, indent: usize, width: usize, label: &str, value: impl std::fmt::Display) {
        let label = format!("{label}:");
        let _ = writeln!(self.out, "{:indent$}{label:<width$}{value}", "");
    }

    fn line(&mut self, indent: usize, text: impl std::fmt::Display) {
        let _ = writeln!(self.out, "{:indent$}{text}", "");
    }
}

const TOP: usize = 18;
const TOP_WITH_PRIORITY_CLASS: usize = 22;
const CONTAINER: usize = 16;
const STATE: usize = 14;

/// The description of `pod` and its `events` at `now`.
pub fn render(pod: &Pod, events: &[Event], now: Timestamp) -> String {
    let mut s = Section::default();
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let annotations = meta.annotations.clone().unwrap_or_default();
    let annotation = |key: &str| annotations.get(key).map_or("<none>", String::as_str);
    let priority_class =
        spec.and_then(|s| s.priority_class_name.as_deref()).filter(|c| !c.is_empty());
    // kubectl aligns the values to its longest label, "Priority Class Name:" when shown.
    let top = if priority_class.is_some() { TOP_WITH_PRIORITY_CLASS } else { TOP };
    s.field(0, top, "Name", meta.name.as_deref().unwrap_or_default());
    s.field(0, top, "Namespace", meta.namespace.as_deref().unwrap_or("default"));
    s.field(0, top, "Priority", admission::priority(pod));
    if let Some(class) = priority_class {
        s.field(0, top, "Priority Class Name", class);
    }
    let node = spec.and_then(|s| s.node_name.as_deref()).unwrap_or("<none>");
    match status.and_then(|s| s.host_ip.as_deref()) {
        Some(ip) => s.field(0, top, "Node", format!("{node}/{ip}")),
        None => s.field(0, top, "Node", node),
    }
    s.field(0, top, "Source", annotation(CONFIG_SOURCE));
    s.field(0, top, "UID", meta.uid.as_deref().unwrap_or("<none>"));
    let start = status.and_then(|s| s.start_time.as_ref()).map(|t| time(t.0));
    s.field(0, top, "Start Time", start.as_deref().unwrap_or("<none>"));
    s.field(0, top, "Config Hash", annotation(CONFIG_HASH));
    s.field(0, top, "Config Seen", annotation(CONFIG_SEEN));
    s.field(0, top, "Mirror", annotation(CONFIG_MIRROR));
    let labels = meta.labels.clone().unwrap_or_default();
    let labels: Vec<_> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    s.field(
        0,
        top,
        "Labels",
        if labels.is_empty() { "<none>".to_owned() } else { labels.join(",") },
    );
    if meta.deletion_timestamp.is_some() {
        s.field(0, top, "Status", "Terminating");
    } else {
        s.field(0, top, "Status", status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending"));
    }
    if let Some(reason) = status.and_then(|s| s.reason.as_deref()) {
        s.field(0, top, "Reason", reason);
    }
    if let Some(message) = status.and_then(|s| s.message.as_deref()) {
        s.field(0, top, "Message", message);
    }
    s.field(0, top, "IP", status.and_then(|s| s.pod_ip.as_deref()).unwrap_or("<none>"));
    let init = spec.and_then(|s| s.init_containers.as_deref()).unwrap_or_default();
    let init_statuses =
        status.and_then(|s| s.init_container_statuses.as_deref()).unwrap_or_default();
    if !init.is_empty() {
        s.line(0, "Init Containers:");
        for c in init {
            container(&mut s, c, init_statuses.iter().find(|st| st.name == c.name));
        }
    }
    s.line(0, "Containers:");
    let statuses = status.and_then(|s| s.container_statuses.as_deref()).unwrap_or_default();
    for c in spec.map(|s| s.containers.as_slice()).unwrap_or_default() {
        container(&mut s, c, statuses.iter().find(|st| st.name == c.name));
    }
    let conditions = status.and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    if conditions.is_empty() {
        s.field(0, top, "Conditions", "<none>");
    } else {
        s.line(0, "Conditions:");
        let mut rows = vec![vec!["Type".to_owned(), "Status".to_owned()]];
        rows.extend(conditions.iter().map(|c| vec![c.type_.clone(), c.status.clone()]));
        for line in table(&rows).lines() {
            s.line(2, line);
        }
    }
    s.field(0, top, "QoS Class", status.and_then(|s| s.qos_class.as_deref()).unwrap_or("<none>"));
    events_section(&mut s, events, now, top);
    s.out
}

fn container(s: &mut Section, c: &Container, status: Option<&ContainerStatus>) {
    s.line(2, format!("{}:", c.name));
    if let Some(id) = status.and_then(|st| st.container_id.as_deref()) {
        s.field(4, CONTAINER, "Container ID", id);
    }
    s.field(4, CONTAINER, "Image", c.image.as_deref().unwrap_or("<none>"));
    if let Some(id) = status.map(|st| st.image_id.as_str()).filter(|id| !id.is_empty()) {
        s.field(4, CONTAINER, "Image ID", id);
    }
    let ports: Vec<_> = c
        .ports
        .iter()
        .flatten()
        .map(|p| format!("{}/{}", p.container_port, p.protocol.as_deref().unwrap_or("TCP")))
        .collect();
    s.field(
        4,
        CONTAINER,
        "Ports",
        if ports.is_empty() { "<none>".to_owned() } else { ports.join(", ") },
    );
    match status.and_then(|st| st.state.as_ref()) {
        Some(state) => container_state(s, "State", state),
        None => s.field(4, CONTAINER, "State", "Waiting"),
    }
    if let Some(last) = status.and_then(|st| st.last_state.as_ref()).filter(|l| has_state(l)) {
        container_state(s, "Last State", last);
    }
    s.field(
        4,
        CONTAINER,
        "Ready",
        if status.is_some_and(|st| st.ready) { "True" } else { "False" },
    );
    s.field(4, CONTAINER, "Restart Count", status.map_or(0, |st| st.restart_count));
    let resources = c.resources.as_ref();
    for (label, list) in [
        ("Limits", resources.and_then(|r| r.limits.as_ref())),
        ("Requests", resources.and_then(|r| r.requests.as_ref())),
    ] {
        resource_list(s, label, list);
    }
    for (label, probe) in [
        ("Liveness", &c.liveness_probe),
        ("Readiness", &c.readiness_probe),
        ("Startup", &c.startup_probe),
    ] {
        if let Some(probe) = probe {
            s.field(4, CONTAINER, label, describe_probe(probe));
        }
    }
    let mounts = c.volume_mounts.as_deref().unwrap_or_default();
    if mounts.is_empty() {
        s.field(4, CONTAINER, "Mounts", "<none>");
    } else {
        s.line(4, "Mounts:");
        for m in mounts {
            let mode = if m.read_only == Some(true) { "ro" } else { "rw" };
            let sub = m.sub_path.as_deref().map(|p| format!(",path=\"{p}\"")).unwrap_or_default();
            s.line(6, format!("{} from {} ({mode}{sub})", m.mount_path, m.name));
        }
    }
}

/// `Limits:` or `Requests:` and a line per resource, sorted, the quantities aligned (as
/// kubectl's `describeContainerResources`); nothing for an empty list.
fn resource_list(s: &mut Section, label: &str, list: Option<&BTreeMap<String, Quantity>>) {
    let Some(list) = list.filter(|l| !l.is_empty()) else { return };
    s.line(4, format!("{label}:"));
    let width = list.keys().map(|name| name.len() + 1).max().unwrap_or(0) + 2;
    for (name, quantity) in list {
        s.field(6, width, name, &quantity.0);
    }
}

/// A probe as kubectl describes it: `http-get http://:8080/healthz delay=3s timeout=1s
/// period=3s #success=1 #failure=3` (the host as the spec has it: empty for the pod IP).
fn describe_probe(probe: &Probe) -> String {
    let port = |p: &IntOrString| match p {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(name) => name.clone(),
    };
    let handler = if let Some(exec) = &probe.exec {
        format!("exec [{}]", exec.command.as_deref().unwrap_or_default().join(" "))
    } else if let Some(get) = &probe.http_get {
        let scheme = get.scheme.as_deref().unwrap_or("HTTP").to_ascii_lowercase();
        let host = get.host.as_deref().unwrap_or_default();
        let path = get.path.as_deref().unwrap_or_default();
        format!("http-get {scheme}://{host}:{}{path}", port(&get.port))
    } else if let Some(tcp) = &probe.tcp_socket {
        format!("tcp-socket {}:{}", tcp.host.as_deref().unwrap_or_default(), port(&tcp.port))
    } else if let Some(grpc) = &probe.grpc {
        format!("grpc <pod>:{} {}", grpc.port, grpc.service.as_deref().unwrap_or_default())
    } else {
        "unknown".to_owned()
    };
    format!(
        "{handler} delay={}s timeout={}s period={}s #success={} #failure={}",
        probe.initial_delay_seconds.unwrap_or(0),
        probe.timeout_seconds.unwrap_or(1),
        probe.period_seconds.unwrap_or(10),
        probe.success_threshold.unwrap_or(1),
        probe.failure_threshold.unwrap_or(3),
    )
}

fn has_state(state: &ContainerState) -> bool {
    state.running.is_some() || state.waiting.is_some() || state.terminated.is_some()
}

/// `State:  Running` and its details (`Started:`), as kubectl's `describeContainerState`.
fn container_state(s: &mut Section, label: &str, state: &ContainerState) {
    if let Some(running) = &state.running {
        s.field(4, CONTAINER, label, "Running");
        let started = running.started_at.as_ref().map(|t| time(t.0));
        s.field(6, STATE, "Started", started.as_deref().unwrap_or("<unknown>"));
    } else if let Some(waiting) = &state.waiting {
        s.field(4, CONTAINER, label, "Waiting");
        if let Some(reason) = &waiting.reason {
            s.field(6, STATE, "Reason", reason);
        }
        if let Some(message) = &waiting.message {
            s.field(6, STATE, "Message", message);
        }
    } else if let Some(t) = &state.terminated {
        s.field(4, CONTAINER, label, "Terminated");
        if let Some(reason) = &t.reason {
            s.field(6, STATE, "Reason", reason);
        }
        if let Some(message) = &t.message {
            s.field(6, STATE, "Message", message);
        }
        s.field(6, STATE, "Exit Code", t.exit_code);
        if let Some(signal) = t.signal.filter(|s| *s != 0) {
            s.field(6, STATE, "Signal", signal);
        }
        let at = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
            t.map_or_else(|| "<unknown>".to_owned(), |t| time(t.0))
        };
        s.field(6, STATE, "Started", at(t.started_at.as_ref()));
        s.field(6, STATE, "Finished", at(t.finished_at.as_ref()));
    } else {
        s.field(4, CONTAINER, label, "Waiting");
    }
}

/// kubectl's Events table: oldest first, `AGE` as `5m (x3 over 10m)` for a repeat.
fn events_section(s: &mut Section, events: &[Event], now: Timestamp, top: usize) {
    if events.is_empty() {
        s.field(0, top, "Events", "<none>");
        return;
    }
    s.line(0, "Events:");
    let header = ["Type", "Reason", "Age", "From", "Message"];
    let mut rows =
        vec![header.map(str::to_owned).to_vec(), header.map(|h| "-".repeat(h.len())).to_vec()];
    for e in events {
        let last = e.last_timestamp.as_ref().or(e.first_timestamp.as_ref()).map(|t| t.0);
        let first = e.first_timestamp.as_ref().map(|t| t.0);
        let count = e.count.unwrap_or(1);
        let when = match (last, first) {
            (Some(last), Some(first)) if count > 1 => {
                format!("{} (x{count} over {})", age(last, now), age(first, now))
            }
            (Some(last), _) => age(last, now),
            (None, _) => "<unknown>".to_owned(),
        };
        let from = e.source.as_ref().and_then(|s| s.component.clone()).unwrap_or_default();
        rows.push(vec![
            e.type_.clone().unwrap_or_default(),
            e.reason.clone().unwrap_or_default(),
            when,
            from,
            e.message.clone().unwrap_or_default().trim().to_owned(),
        ]);
    }
    for line in table(&rows).lines() {
        s.line(2, line);
    }
}

/// kubectl describe's time format (RFC 1123 with a numeric zone), in UTC.
fn time(t: Timestamp) -> String {
    t.strftime("%a, %d %b %Y %H:%M:%S %z").to_string()
}

#[cfg(test)]
mod tests;
