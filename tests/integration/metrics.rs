//! `/metrics` of a real agent: the exposition parses with an OpenMetrics parser and
//! follows Prometheus' naming rules (a tidy check), and its figures move when pods are
//! dropped, crash and are rejected (end to end, with real pods).

use outpost_tests::needs;
use std::collections::BTreeMap;
use std::time::Duration;

use openmetrics_parser::openmetrics::parse_openmetrics;
use openmetrics_parser::{MetricsExposition, OpenMetricsType, OpenMetricsValue};
use outpost_tests::agent::Agent;
use outpost_tests::apiserver::TestApiServer;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pod_yaml;
use outpost_tests::pods::{Node, eventually};

type Exposition = MetricsExposition<OpenMetricsType, OpenMetricsValue>;

const LONG: Duration = Duration::from_secs(60);
const TOKEN: &str = "metrics-test-token";

/// Every family a dry-run agent with these sources exports (by family name: a
/// counter's without `_total`). Labelled families appear with their first sample:
/// `outpost_container_restarts` and `outpost_pod_start_duration_seconds` need pods that
/// run (the end-to-end test below), `outpost_checkpoint_write_failures` a failed write
/// (the checkpoint unit tests).
const EXPECTED: &[&str] = &[
    "outpost_source_state",
    "outpost_source_errors",
    "outpost_source_last_success_timestamp_seconds",
    "outpost_pods",
    "outpost_pod_conflicts",
    "outpost_running_pods",
    "outpost_running_containers",
    "outpost_pod_deltas",
    "outpost_manifest_errors",
    "outpost_image_import_duration_seconds",
    "outpost_image_pull_duration_seconds",
    "outpost_checkpoint_writes",
    "outpost_manifest_watcher",
    "outpost_apiserver_reachable",
    "outpost_pod_status_updates_queued",
    "outpost_events_recorded",
    "outpost_events_rate_limited",
    "outpost_events_dropped",
    "process_cpu_seconds",
    "process_resident_memory_bytes",
    "process_start_time_seconds",
    "process_open_fds",
    "process_max_fds",
    "process_threads",
];

/// The process metrics every Prometheus client library exports under these names.
const PROCESS: &[&str] = &[
    "process_cpu_seconds",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_start_time_seconds",
    "process_open_fds",
    "process_max_fds",
    "process_threads",
];

/// `GET /metrics`: the raw text, checked to parse as OpenMetrics.
fn scrape(agent: &Agent) -> (String, Exposition) {
    let (status, text) = agent.get("/metrics");
    assert_eq!(status, 200, "{text}");
    let parsed = parse_openmetrics(&text)
        .unwrap_or_else(|e| panic!("/metrics is not valid OpenMetrics: {e:?}\n{text}"));
    (text, parsed)
}

fn snake_case(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.contains("__")
        && !name.ends_with('_')
}

/// The sample of `family` whose labels include all of `labels`, as a number (a histogram
/// gives its count; an info metric 1).
fn value(exposition: &Exposition, family: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let family = exposition.families.get(family)?;
    family.iter_samples().find_map(|sample| {
        let set = sample.get_labelset().ok()?;
        if !labels.iter().all(|(k, v)| set.get_label_value(k) == Some(*v)) {
            return None;
        }
        Some(match &sample.value {
            OpenMetricsValue::Counter(c) => c.value.as_f64(),
            OpenMetricsValue::Gauge(n) | OpenMetricsValue::Unknown(n) => n.as_f64(),
            OpenMetricsValue::Histogram(h) => h.count.unwrap_or(0) as f64,
            OpenMetricsValue::Info => 1.0,
            other => panic!("unexpected sample {other:?}"),
        })
    })
}

/// A family as its `# HELP`, `# TYPE` and `# UNIT` lines declare it (a family with no
/// sample yet is declared all the same, and the parser leaves it out).
#[derive(Debug, Default)]
struct Declared {
    kind: String,
    help: String,
    unit: String,
}

fn declared(text: &str) -> BTreeMap<String, Declared> {
    let mut families: BTreeMap<String, Declared> = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.splitn(4, ' ');
        let (Some("#"), Some(what), Some(name)) = (words.next(), words.next(), words.next()) else {
            continue;
        };
        let rest = words.next().unwrap_or_default().to_owned();
        let family = families.entry(name.to_owned()).or_default();
        match what {
            "HELP" => family.help = rest,
            "TYPE" => family.kind = rest,
            "UNIT" => family.unit = rest,
            _ => {}
        }
    }
    families
}

/// The naming rules: what a Prometheus linter (promtool check metrics) would say.
fn check_names(text: &str, exposition: &Exposition) {
    let families = declared(text);
    let mut problems = Vec::new();
    for (name, family) in &families {
        check_family(name, family, &mut problems);
    }
    for (name, family) in &exposition.families {
        for label in family.get_label_names() {
            if !snake_case(label) {
                problems.push(format!("{name}: label {label:?} is not snake_case"));
            }
        }
    }
    // Each sample's name is its family's with the suffix its type allows: the parser
    // keys counters by their family name, so `_total` is checked on the samples here.
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let sample = line.split(['{', ' ']).next().unwrap_or_default();
        let known = families.iter().any(|(name, f)| {
            let suffixes: &[&str] = match f.kind.as_str() {
                "counter" => &["_total", "_created"],
                "histogram" => &["_bucket", "_count", "_sum", "_created"],
                "info" => &["_info"],
                _ => &[""],
            };
            suffixes.iter().any(|s| sample == format!("{name}{s}"))
        });
        if !known {
            problems.push(format!("sample {sample:?} has no family of a type that allows it"));
        }
    }
    assert!(problems.is_empty(), "{}\n{text}", problems.join("\n"));
}

/// Every family of the exposition is in the book's metrics reference
/// (`docs/src/reference/metrics.md`; the tidy test checks the page against the code).
fn check_documented(text: &str) {
    let documented = crate::tidy::book::documented_metrics();
    let missing: Vec<String> =
        declared(text).into_keys().filter(|name| !documented.contains(name)).collect();
    assert!(missing.is_empty(), "families not in docs/src/reference/metrics.md: {missing:?}");
}

fn check_family(name: &str, family: &Declared, problems: &mut Vec<String>) {
    if !(name.starts_with("outpost_") || PROCESS.contains(&name)) {
        problems.push(format!("{name}: neither outpost_* nor a standard process_* metric"));
    }
    if !snake_case(name) {
        problems.push(format!("{name}: not snake_case"));
    }
    if family.help.trim().is_empty() {
        problems.push(format!("{name}: no help text"));
    }
    if family.kind.is_empty() {
        problems.push(format!("{name}: no type"));
    }
    if name.ends_with("_total") {
        problems.push(format!("{name}: a family name ends in _total (only counter samples do)"));
    }
    // Base units in the name where a unit applies (whole words: `image` is no `age`).
    let words: Vec<&str> = name.split('_').collect();
    let has = |w: &&str| words.contains(w);
    let timed = ["duration", "latency", "time", "cpu", "age"].iter().any(has);
    if timed && !name.ends_with("_seconds") {
        problems.push(format!("{name}: a time without _seconds"));
    }
    let sized = ["memory", "size", "bytes"].iter().any(has);
    if sized && !name.ends_with("_bytes") {
        problems.push(format!("{name}: a size without _bytes"));
    }
    if !family.unit.is_empty() && !name.ends_with(&format!("_{}", family.unit)) {
        problems.push(format!("{name}: unit {} is not the name's suffix", family.unit));
    }
}

/// A dry-run agent with every source that needs no containerd: the manifest directory,
/// the push source (a token file) and the API server (a test server).
struct DryRun {
    _rt: tokio::runtime::Runtime,
    _server: TestApiServer,
    dir: tempfile::TempDir,
    agent: Agent,
}

impl DryRun {
    fn start() -> DryRun {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let server = rt.block_on(TestApiServer::start()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let manifests = dir.path().join("manifests");
        std::fs::create_dir_all(&manifests).unwrap();
        std::fs::write(manifests.join("web.yaml"), pod_yaml("web", "nginx:1")).unwrap();
        std::fs::write(manifests.join("broken.yaml"), "kind: Pod\nspec: [not a spec\n").unwrap();
        outpost_tests::write_private(&dir.path().join("token"), TOKEN);
        let kubeconfig = server.node_kubeconfig(dir.path(), "edge-1").unwrap();
        let state = dir.path().join("state");
        let agent = Agent::start_args(
            &manifests,
            &[
                "--kubeconfig".as_ref(),
                kubeconfig.as_os_str(),
                "--token-file".as_ref(),
                dir.path().join("token").as_os_str(),
                "--state-dir".as_ref(),
                state.as_os_str(),
            ],
        );
        DryRun { _rt: rt, _server: server, dir, agent }
    }

    fn push(&self, key: &str, body: &str) -> u16 {
        let auth = format!("Bearer {TOKEN}");
        let path = format!("/manifests/{key}");
        self.agent.request("PUT", &path, &[("Authorization", &auth)], body.as_bytes()).0
    }
}

#[test]
fn the_exposition_parses_and_follows_the_naming_rules() {
    let run = DryRun::start();
    run.agent.poll("/readyz", |status, _| status == 200);
    assert_eq!(run.push("cache", &pod_yaml("cache", "redis:7")), 201);
    assert_eq!(run.push("bad", "kind: Pod\nmetadata: {name: [x]}\n"), 400);
    let push_added = [("op", "add"), ("source", "push")];
    eventually("the pushed pod's delta is counted", LONG, || {
        value(&scrape(&run.agent).1, "outpost_pod_deltas", &push_added) == Some(1.0)
    });
    let (text, exposition) = scrape(&run.agent);
    check_names(&text, &exposition);
    check_documented(&text);
    let names = declared(&text);
    let missing: Vec<&&str> = EXPECTED.iter().filter(|f| !names.contains_key(**f)).collect();
    assert!(missing.is_empty(), "families missing: {missing:?}\n{text}");
    // What happened before the scrape is in it.
    let count = |family, labels: &[(&str, &str)]| value(&exposition, family, labels);
    assert_eq!(count("outpost_pod_deltas", &[("op", "add"), ("source", "file")]), Some(1.0));
    assert_eq!(count("outpost_manifest_errors", &[("source", "file")]), Some(1.0));
    assert_eq!(count("outpost_manifest_errors", &[("source", "push")]), Some(1.0));
    assert!(count("outpost_checkpoint_writes", &[("source", "push")]) >= Some(1.0), "{text}");
    assert_eq!(count("outpost_apiserver_reachable", &[]), Some(1.0));
    assert!(count("process_resident_memory_bytes", &[]) > Some(0.0));
    assert!(run.dir.path().join("state/checkpoints/push.json").is_file());
}

/// Where fanotify is blocked (seccomp, as in a container with the default profile), the
/// info metric says inotify.
#[needs(seccomp)]
#[test]
fn the_watcher_info_names_inotify_where_fanotify_is_blocked() {
    let command = outpost_tests::without_fanotify();
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start_with(command, dir.path(), &[] as &[&str]);
    agent.poll("/readyz", |status, _| status == 200);
    let (text, exposition) = scrape(&agent);
    assert_eq!(
        value(&exposition, "outpost_manifest_watcher", &[("backend", "inotify")]),
        Some(1.0),
        "{text}"
    );
    assert_eq!(value(&exposition, "outpost_manifest_watcher", &[("backend", "fanotify")]), None);
}

/// A static pod manifest: one busybox container running `script` with `sh -c`.
fn manifest(name: &str, script: &str) -> String {
    let script = serde_json::to_string(script).unwrap();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  restartPolicy: Always\n  containers:\n  - name: main\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {script}]\n"
    )
}

#[needs(pods)]
#[test]
fn the_figures_move_when_pods_start_crash_and_are_rejected() {
    let node = Node::new();
    let agent = node.start();
    agent.poll_within("/readyz", LONG, |status, _| status == 200);
    let now = |family: &str, labels: &[(&str, &str)]| {
        value(&scrape(&agent).1, family, labels).unwrap_or(0.0)
    };
    let file = [("source", "file")];
    let adds = [("op", "add"), ("source", "file")];
    let (adds_before, starts_before) =
        (now("outpost_pod_deltas", &adds), now("outpost_pod_start_duration_seconds", &file));
    assert_eq!(now("outpost_running_pods", &file), 0.0);

    node.put("web.yaml", &manifest("web", "while true; do sleep 1; done"));
    eventually("the pod and its container run", LONG, || {
        let (_, e) = scrape(&agent);
        value(&e, "outpost_running_pods", &file) == Some(1.0)
            && value(&e, "outpost_running_containers", &file) == Some(1.0)
    });
    let (text, exposition) = scrape(&agent);
    let get = |family, labels: &[(&str, &str)]| value(&exposition, family, labels).unwrap_or(0.0);
    assert!(get("outpost_pod_deltas", &adds) > adds_before, "{text}");
    assert!(get("outpost_pod_start_duration_seconds", &file) > starts_before, "{text}");
    assert_eq!(
        value(&exposition, "outpost_manifest_watcher", &[("backend", "fanotify")]),
        Some(1.0),
        "as root, with fanotify allowed: {text}"
    );

    // restartPolicy Always: every exit is a restart the pod workers perform.
    node.put("crash.yaml", &manifest("crash", "exit 3"));
    eventually("the crashing container is restarted", LONG, || {
        now("outpost_container_restarts", &file) >= 1.0
    });

    let errors = now("outpost_manifest_errors", &file);
    node.put("broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [broken\n");
    eventually("the broken manifest is counted", LONG, || {
        now("outpost_manifest_errors", &file) > errors
    });
    // With pods running (and BPF where it loads), more families are there.
    check_documented(&scrape(&agent).0);
}
