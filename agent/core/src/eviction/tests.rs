//! E1–E2: thresholds, the manager's passes, ranking and the victim.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use proptest::prelude::*;

use super::rank::ContainerStats;
use super::threshold::{DEFAULT_PRESSURE_TRANSITION_PERIOD, Field, parse_statements};
use super::*;
use crate::pod::Source;

const MI: i64 = 1024 * 1024;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn hard(pairs: &[(&str, &str)]) -> Config {
    Config::resolve(&Settings { hard: Some(map(pairs)), ..Settings::default() }).unwrap()
}

fn signals(config: &Config) -> Vec<(Signal, bool)> {
    config.thresholds.iter().map(|t| (t.signal, t.is_hard())).collect()
}

// E1: kubelet's default hard thresholds on Linux.
#[test]
fn defaults_are_kubelets() {
    let config = Config::default();
    assert_eq!(
        signals(&config),
        vec![
            (Signal::MemoryAvailable, true),
            (Signal::NodeFsAvailable, true),
            (Signal::NodeFsInodesFree, true),
            (Signal::ImageFsAvailable, true),
            (Signal::ImageFsInodesFree, true),
        ]
    );
    assert_eq!(
        config.hard(Signal::MemoryAvailable).unwrap().value,
        ThresholdValue::Quantity(100 * MI)
    );
    assert_eq!(
        config.hard(Signal::NodeFsAvailable).unwrap().value,
        ThresholdValue::Percentage(0.1)
    );
    assert_eq!(
        config.hard(Signal::ImageFsAvailable).unwrap().value,
        ThresholdValue::Percentage(0.15)
    );
    assert_eq!(config.pressure_transition_period, DEFAULT_PRESSURE_TRANSITION_PERIOD);
    assert_eq!(config.max_pod_grace_period, 0);
    assert!(config.hard(Signal::PidAvailable).is_none(), "kubelet has no default PID threshold");
}

// E1: giving evictionHard replaces the defaults (the others are set to 0) unless
// mergeDefaultEvictionSettings is true.
#[test]
fn partial_hard_thresholds_replace_the_defaults_unless_merged() {
    let config = hard(&[("memory.available", "1Gi")]);
    assert_eq!(signals(&config), vec![(Signal::MemoryAvailable, true)]);
    assert_eq!(config.thresholds[0].value, ThresholdValue::Quantity(1024 * MI));

    let merged = Config::resolve(&Settings {
        hard: Some(map(&[("memory.available", "1Gi"), ("pid.available", "10%")])),
        merge_defaults: true,
        ..Settings::default()
    })
    .unwrap();
    assert_eq!(merged.thresholds.len(), 6);
    assert_eq!(
        merged.hard(Signal::MemoryAvailable).unwrap().value,
        ThresholdValue::Quantity(1024 * MI)
    );
    assert_eq!(
        merged.hard(Signal::NodeFsInodesFree).unwrap().value,
        ThresholdValue::Percentage(0.05)
    );
    assert_eq!(merged.hard(Signal::PidAvailable).unwrap().value, ThresholdValue::Percentage(0.1));
}

#[test]
fn zero_and_hundred_percent_disable_a_threshold() {
    let config =
        hard(&[("memory.available", "0%"), ("nodefs.available", "100%"), ("pid.available", "5%")]);
    assert_eq!(signals(&config), vec![(Signal::PidAvailable, true)]);
    assert!(hard(&[]).thresholds.is_empty(), "an empty map disables every hard threshold");
}

#[test]
fn flags_split_into_statements() {
    let parsed =
        parse_statements(Field::Hard, "memory.available<100Mi, nodefs.available<10%", '<').unwrap();
    assert_eq!(parsed, map(&[("memory.available", "100Mi"), ("nodefs.available", "10%")]));
    let grace = parse_statements(Field::SoftGracePeriod, "memory.available=1m30s", '=').unwrap();
    assert_eq!(grace, map(&[("memory.available", "1m30s")]));
    let error = parse_statements(Field::Hard, "memory.available=100Mi", '<').unwrap_err();
    assert_eq!(
        error.to_string(),
        "--eviction-hard (evictionHard): \"memory.available=100Mi\" is not a statement; expected \
         signal<value, comma separated"
    );
}

#[test]
fn errors_name_the_flag_and_the_value() {
    let message = |settings: Settings| Config::resolve(&settings).unwrap_err().to_string();
    let hard = |pairs: &[(&str, &str)]| Settings { hard: Some(map(pairs)), ..Settings::default() };
    assert!(message(hard(&[("memory.free", "1Gi")])).starts_with(
        "--eviction-hard (evictionHard): unsupported eviction signal \"memory.free\""
    ));
    assert_eq!(
        message(hard(&[("memory.available", "lots")])),
        "--eviction-hard (evictionHard): memory.available \"lots\": expected a positive quantity \
         such as 100Mi, or a percentage"
    );
    assert!(message(hard(&[("memory.available", "0")])).contains("\"0\": expected a positive"));
    assert!(message(hard(&[("memory.available", "-1Mi")])).contains("\"-1Mi\""));
    assert_eq!(
        message(hard(&[("nodefs.available", "120%")])),
        "--eviction-hard (evictionHard): nodefs.available \"120%\": a percentage must be between \
         0% and 100%"
    );
    let soft = Settings { soft: map(&[("memory.available", "1Gi")]), ..Settings::default() };
    assert_eq!(
        message(soft.clone()),
        "--eviction-soft (evictionSoft): memory.available has no grace period; give one in \
         --eviction-soft-grace-period (evictionSoftGracePeriod)"
    );
    let bad_grace = Settings { soft_grace_period: map(&[("memory.available", "soon")]), ..soft };
    assert!(message(bad_grace).starts_with(
        "--eviction-soft-grace-period (evictionSoftGracePeriod): memory.available \"soon\""
    ));
    let reclaim =
        Settings { minimum_reclaim: map(&[("nodefs.available", "0%")]), ..Settings::default() };
    assert!(message(reclaim).starts_with("--eviction-minimum-reclaim (evictionMinimumReclaim)"));
    let period = Settings { pressure_transition_period: Some("-1m".into()), ..Settings::default() };
    assert!(message(period).starts_with("--eviction-pressure-transition-period"));
    let max = Settings { max_pod_grace_period: Some(-5), ..Settings::default() };
    assert_eq!(
        message(max),
        "--eviction-max-pod-grace-period (evictionMaxPodGracePeriod): -5: must not be negative"
    );
}

#[test]
fn soft_thresholds_take_their_grace_periods_and_reclaims_apply_to_both() {
    let config = Config::resolve(&Settings {
        hard: Some(map(&[("memory.available", "100Mi")])),
        soft: map(&[("memory.available", "1Gi"), ("nodefs.available", "20%")]),
        soft_grace_period: map(&[("memory.available", "1m30s"), ("nodefs.available", "2m")]),
        minimum_reclaim: map(&[("memory.available", "500Mi"), ("nodefs.available", "5%")]),
        pressure_transition_period: Some("30s".into()),
        max_pod_grace_period: Some(60),
        merge_defaults: false,
    })
    .unwrap();
    let soft: Vec<_> = config.thresholds.iter().filter(|t| !t.is_hard()).collect();
    assert_eq!(soft[0].signal, Signal::MemoryAvailable);
    assert_eq!(soft[0].grace_period, Duration::from_secs(90));
    assert_eq!(soft[1].grace_period, Duration::from_secs(120));
    assert!(config.thresholds.iter().all(|t| t.min_reclaim.is_some()));
    assert_eq!(config.pressure_transition_period, Duration::from_secs(30));
    assert_eq!(config.max_pod_grace_period, 60);
}

// kubelet's addAllocatableThresholds: hard memory.available thresholds are copied.
#[test]
fn allocatable_thresholds_copy_the_hard_memory_ones() {
    let config = Config::resolve(&Settings {
        hard: Some(map(&[("memory.available", "200Mi"), ("nodefs.available", "10%")])),
        soft: map(&[("memory.available", "1Gi")]),
        soft_grace_period: map(&[("memory.available", "1m")]),
        ..Settings::default()
    })
    .unwrap()
    .with_allocatable();
    let allocatable: Vec<_> = config
        .thresholds
        .iter()
        .filter(|t| t.signal == Signal::AllocatableMemoryAvailable)
        .collect();
    assert_eq!(allocatable.len(), 1);
    assert!(allocatable[0].is_hard());
    assert_eq!(allocatable[0].value, ThresholdValue::Quantity(200 * MI));
}

#[test]
fn hard_quantities_are_what_allocatable_holds_back() {
    let config = Config::default();
    assert_eq!(config.hard_quantity(Signal::MemoryAvailable, 8192 * MI), 100 * MI);
    assert_eq!(config.hard_quantity(Signal::NodeFsAvailable, 1000), 100);
    assert_eq!(config.hard_quantity(Signal::PidAvailable, 1000), 0);
}

#[test]
fn percentages_apply_to_the_capacity() {
    assert_eq!(ThresholdValue::Percentage(0.1).quantity(1000), 100);
    assert_eq!(ThresholdValue::Quantity(7).quantity(1000), 7);
    let t = hard(&[("nodefs.available", "10%")]).thresholds[0];
    assert!(t.met(99, 1000, false));
    assert!(!t.met(100, 1000, false), "the operator is strictly less than");
}

fn memory(available: i64) -> Observations {
    Observations::new().with(Signal::MemoryAvailable, available, 8192 * MI)
}

// E1: a hard threshold drives eviction at once; the condition follows.
#[test]
fn a_hard_threshold_reclaims_at_once() {
    let mut manager = Manager::new(Config::default());
    let now = Instant::now();
    let calm = manager.observe(&memory(500 * MI), now);
    assert_eq!(calm.pressure, Pressure::default());
    assert!(calm.reclaim.is_none());
    assert!(calm.next_pass.is_none());
    let low = manager.observe(&memory(42 * MI), now + Duration::from_secs(1));
    assert!(low.pressure.memory && !low.pressure.disk && !low.pressure.pid);
    let reclaim = low.reclaim.unwrap();
    assert_eq!(reclaim.signal(), Signal::MemoryAvailable);
    assert_eq!(reclaim.resource, Resource::Memory);
    assert_eq!(reclaim.threshold_quantity, 100 * MI);
    assert_eq!(reclaim.to_reclaim, 58 * MI);
}

#[test]
fn a_soft_threshold_waits_for_its_grace_period_unbroken() {
    let config = Config::resolve(&Settings {
        hard: Some(BTreeMap::new()),
        soft: map(&[("memory.available", "1Gi")]),
        soft_grace_period: map(&[("memory.available", "30s")]),
        ..Settings::default()
    })
    .unwrap();
    let mut manager = Manager::new(config);
    let t0 = Instant::now();
    let first = manager.observe(&memory(512 * MI), t0);
    assert!(first.pressure.memory, "the condition does not wait for the grace period");
    assert!(first.reclaim.is_none());
    assert_eq!(first.next_pass, Some(t0 + Duration::from_secs(30)));
    assert!(manager.observe(&memory(512 * MI), t0 + Duration::from_secs(29)).reclaim.is_none());
    let due = manager.observe(&memory(512 * MI), t0 + Duration::from_secs(30));
    assert_eq!(due.reclaim.unwrap().threshold.grace_period, Duration::from_secs(30));
    // A break restarts the grace period.
    let t1 = t0 + Duration::from_secs(31);
    manager.observe(&memory(2048 * MI), t1);
    assert!(manager.observe(&memory(512 * MI), t1 + Duration::from_secs(1)).reclaim.is_none());
}

#[test]
fn a_met_threshold_holds_until_its_minimum_reclaim() {
    let config = Config::resolve(&Settings {
        hard: Some(map(&[("memory.available", "100Mi")])),
        minimum_reclaim: map(&[("memory.available", "50Mi")]),
        ..Settings::default()
    })
    .unwrap();
    let mut manager = Manager::new(config);
    let t0 = Instant::now();
    assert_eq!(manager.observe(&memory(90 * MI), t0).reclaim.unwrap().to_reclaim, 60 * MI);
    let partly = manager.observe(&memory(120 * MI), t0 + Duration::from_secs(1));
    assert!(partly.reclaim.is_some(), "above the threshold but not above threshold + reclaim");
    let resolved = manager.observe(&memory(151 * MI), t0 + Duration::from_secs(2));
    assert!(resolved.reclaim.is_none());
    assert!(manager.observe(&memory(120 * MI), t0 + Duration::from_secs(3)).reclaim.is_none());
}

#[test]
fn pressure_holds_for_the_transition_period() {
    let config =
        Config { pressure_transition_period: Duration::from_secs(60), ..Config::default() };
    let mut manager = Manager::new(config);
    let t0 = Instant::now();
    manager.observe(&memory(10 * MI), t0);
    let after = manager.observe(&memory(4096 * MI), t0 + Duration::from_secs(10));
    assert!(after.pressure.memory);
    assert!(after.reclaim.is_none(), "eviction stops as soon as the signal recovers");
    assert_eq!(after.next_pass, Some(t0 + Duration::from_secs(60)));
    let cleared = manager.observe(&memory(4096 * MI), t0 + Duration::from_secs(60));
    assert!(!cleared.pressure.memory);
    assert!(cleared.next_pass.is_none());
}

#[test]
fn memory_is_reclaimed_before_disk_and_each_signal_sets_its_condition() {
    let config = hard(&[
        ("nodefs.inodesFree", "5%"),
        ("memory.available", "100Mi"),
        ("pid.available", "10%"),
    ]);
    let mut manager = Manager::new(config);
    let observations = Observations::new()
        .with(Signal::NodeFsInodesFree, 1, 1000)
        .with(Signal::PidAvailable, 1, 1000)
        .with(Signal::MemoryAvailable, MI, 1024 * MI);
    let outcome = manager.observe(&observations, Instant::now());
    assert_eq!(outcome.pressure, Pressure { memory: true, disk: true, pid: true });
    assert_eq!(outcome.reclaim.unwrap().signal(), Signal::MemoryAvailable);
    let disk_only = Observations::new().with(Signal::NodeFsInodesFree, 1, 1000);
    let mut manager =
        Manager::new(hard(&[("nodefs.inodesFree", "5%"), ("memory.available", "100Mi")]));
    let reclaim = manager.observe(&disk_only, Instant::now()).reclaim.unwrap();
    assert_eq!((reclaim.resource, reclaim.threshold_quantity), (Resource::Inodes, 50));
}

#[test]
fn an_unobserved_signal_meets_nothing() {
    let mut manager = Manager::new(Config::default());
    let outcome = manager.observe(&Observations::new(), Instant::now());
    assert_eq!(outcome.pressure, Pressure::default());
    assert!(outcome.reclaim.is_none());
}

struct P(Pod);

impl P {
    fn new(name: &str) -> P {
        P(Pod {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("default".to_owned()),
                uid: Some(format!("uid-{name}")),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container { name: name.to_owned(), ..Container::default() }],
                ..PodSpec::default()
            }),
            status: None,
        })
    }

    fn request(mut self, resource: &str, value: &str) -> P {
        let spec = self.0.spec.as_mut().unwrap();
        let requests = spec.containers[0]
            .resources
            .get_or_insert_with(ResourceRequirements::default)
            .requests
            .get_or_insert_with(BTreeMap::new);
        requests.insert(resource.to_owned(), Quantity(value.to_owned()));
        self
    }

    fn priority(mut self, priority: i32) -> P {
        self.0.spec.as_mut().unwrap().priority = Some(priority);
        self
    }

    fn grace(mut self, seconds: i64) -> P {
        self.0.spec.as_mut().unwrap().termination_grace_period_seconds = Some(seconds);
        self
    }

    fn api(self, stats: Option<PodStats>) -> Candidate {
        Candidate { pod: Arc::new(self.0), source: Source::Api, stats }
    }
}

fn using(memory: u64) -> Option<PodStats> {
    Some(PodStats { memory, ..PodStats::default() })
}

fn names(candidates: &[Candidate]) -> Vec<&str> {
    candidates.iter().map(|c| c.pod.metadata.name.as_deref().unwrap()).collect()
}

// E2: memory: over requests first, then priority, then usage above requests.
#[test]
fn memory_ranking_is_kubelets() {
    let mi = 1024 * 1024;
    let mut pods = vec![
        P::new("within").request("memory", "1Gi").api(using(512 * mi)),
        P::new("small-over").api(using(10 * mi)),
        P::new("big-over").api(using(400 * mi)),
        P::new("important-over").priority(1000).api(using(900 * mi)),
        P::new("over-request").request("memory", "100Mi").api(using(450 * mi)),
        P::new("unknown").request("memory", "1Gi").api(None),
    ];
    rank(&mut pods, Resource::Memory);
    assert_eq!(
        names(&pods),
        ["unknown", "big-over", "over-request", "small-over", "important-over", "within"]
    );
}

#[test]
fn disk_ranking_uses_disk_usage_and_the_storage_request() {
    let disk =
        |bytes: u64, inodes: u64| Some(PodStats { disk: bytes, inodes, ..PodStats::default() });
    let mut pods = vec![
        P::new("requested").request("ephemeral-storage", "1Gi").api(disk(100 << 20, 10)),
        P::new("writer").api(disk(200 << 20, 5)),
        P::new("quiet").api(disk(1 << 20, 50)),
    ];
    rank(&mut pods, Resource::EphemeralStorage);
    assert_eq!(names(&pods), ["writer", "quiet", "requested"]);
    rank(&mut pods, Resource::Inodes);
    // Every pod exceeds its (zero) inode request; the storage request is subtracted.
    assert_eq!(names(&pods), ["quiet", "writer", "requested"]);
}

#[test]
fn pid_ranking_is_priority_then_processes() {
    let procs = |n: u64| Some(PodStats { processes: n, ..PodStats::default() });
    let mut pods = vec![
        P::new("few").api(procs(2)),
        P::new("many-important").priority(10).api(procs(500)),
        P::new("many").api(procs(300)),
    ];
    rank(&mut pods, Resource::Pids);
    assert_eq!(names(&pods), ["many", "few", "many-important"]);
}

fn reclaim_memory(hard: bool) -> (Reclaim, Vec<Threshold>, Observations) {
    let threshold = Threshold {
        signal: Signal::MemoryAvailable,
        value: ThresholdValue::Quantity(100 * MI),
        grace_period: if hard { Duration::ZERO } else { Duration::from_secs(60) },
        min_reclaim: None,
    };
    let reclaim = Reclaim {
        threshold,
        resource: Resource::Memory,
        threshold_quantity: 100 * MI,
        available: 42 * MI,
        to_reclaim: 58 * MI,
    };
    (reclaim, vec![threshold], memory(42 * MI))
}

// E2: the message is kubelet's, word for word.
#[test]
fn the_victim_carries_kubelets_message() {
    let mut stats = using(400 << 20).unwrap();
    stats.containers =
        vec![ContainerStats { name: "hog".into(), memory: Some(400 << 20), disk: None }];
    let hog = P::new("hog").api(Some(stats));
    let (reclaim, met, observations) = reclaim_memory(true);
    let eviction = victim(&[hog], &reclaim, &met, &observations, 0).unwrap();
    assert_eq!(
        eviction.message,
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 42Mi. \
         Container hog was using 400Mi, request is 0, has larger consumption of memory. "
    );
    assert_eq!(eviction.grace_period, Duration::from_secs(1));
    assert_eq!((eviction.uid.as_str(), eviction.name.as_str()), ("uid-hog", "hog"));
    assert_eq!(eviction.signal, Signal::MemoryAvailable);
}

#[test]
fn containers_within_their_requests_are_not_named() {
    let mut stats = using(50 << 20).unwrap();
    stats.containers =
        vec![ContainerStats { name: "app".into(), memory: Some(50 << 20), disk: None }];
    let app = P::new("app").request("memory", "64Mi").api(Some(stats));
    let (reclaim, met, observations) = reclaim_memory(true);
    let eviction = victim(&[app], &reclaim, &met, &observations, 0).unwrap();
    assert_eq!(
        eviction.message,
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 42Mi. "
    );
}

// E2: static, mirror and system-critical pods are never evicted.
#[test]
fn critical_pods_are_never_the_victim() {
    let static_pod = Candidate { source: Source::File, ..P::new("static").api(using(1 << 30)) };
    let mut mirror = P::new("mirror");
    crate::pod::set_annotation(&mut mirror.0, crate::pod::CONFIG_MIRROR, "abc");
    let mirror = mirror.api(using(1 << 30));
    let critical = P::new("critical").priority(2_000_001_000).api(using(1 << 30));
    let mut by_class = P::new("by-class");
    by_class.0.spec.as_mut().unwrap().priority_class_name = Some("system-cluster-critical".into());
    let by_class = by_class.api(using(1 << 30));
    let (reclaim, met, observations) = reclaim_memory(true);
    let only_critical = [static_pod, mirror, critical, by_class];
    assert!(only_critical.iter().all(Candidate::is_critical));
    assert!(victim(&only_critical, &reclaim, &met, &observations, 0).is_none());
    let mut all = only_critical.to_vec();
    all.push(P::new("plain").api(using(1)));
    rank(&mut all, Resource::Memory);
    assert_eq!(victim(&all, &reclaim, &met, &observations, 0).unwrap().name, "plain");
}

#[test]
fn a_soft_threshold_gives_the_shorter_of_the_pod_grace_and_the_maximum() {
    let (reclaim, met, observations) = reclaim_memory(false);
    let pod = |grace| [P::new("p").grace(grace).api(using(1))];
    let grace = |pods: &[Candidate], max| {
        victim(pods, &reclaim, &met, &observations, max).unwrap().grace_period
    };
    assert_eq!(grace(&pod(30), 10), Duration::from_secs(10));
    assert_eq!(grace(&pod(5), 10), Duration::from_secs(5));
    assert_eq!(grace(&pod(30), 0), Duration::ZERO);
}

#[test]
fn pid_and_inode_messages_print_counts() {
    let threshold = Threshold {
        signal: Signal::PidAvailable,
        value: ThresholdValue::Percentage(0.1),
        grace_period: Duration::ZERO,
        min_reclaim: None,
    };
    let observations = Observations::new().with(Signal::PidAvailable, 1000, 32_768);
    let candidate = P::new("forker").api(Some(PodStats { processes: 900, ..PodStats::default() }));
    assert_eq!(
        rank::message(Resource::Pids, &candidate, &[threshold], &observations),
        "The node was low on resource: pids. Threshold quantity: 3276, available: 1k. "
    );
}

fn candidate_strategy() -> impl Strategy<Value = Candidate> {
    (0u8..4, -5i32..5, proptest::option::of(0u64..2000), 0u64..2000, any::<bool>()).prop_map(
        |(kind, priority, memory, request, is_static)| {
            let name = format!("p{kind}{priority}{memory:?}{request}");
            let pod = P::new(&name).priority(priority).request("memory", &request.to_string());
            let mut candidate =
                pod.api(memory.map(|m| PodStats { memory: m, ..PodStats::default() }));
            if is_static {
                candidate.source = Source::File;
            }
            candidate
        },
    )
}

proptest! {
    // E2: the ranking is a total order consistent with kubelet's keys: unknown usage,
    // then exceeding requests, then priority, then usage above the request.
    #[test]
    fn memory_ranking_respects_its_keys(mut pods in proptest::collection::vec(candidate_strategy(), 0..12)) {
        let before = pods.len();
        rank(&mut pods, Resource::Memory);
        prop_assert_eq!(pods.len(), before);
        let key = |c: &Candidate| {
            let stats = c.stats.as_ref().map(|s| i64::try_from(s.memory).unwrap());
            let request = crate::qos::pod_request(&c.pod, "memory");
            (
                stats.is_some(),
                stats.map(|m| m <= request),
                crate::admission::priority(&c.pod),
                stats.map(|m| -(m - request)),
            )
        };
        for pair in pods.windows(2) {
            let (a, b) = (key(&pair[0]), key(&pair[1]));
            if a.0 && b.0 {
                prop_assert!(a <= b, "{:?} before {:?}", a, b);
            } else {
                prop_assert!(!a.0 || b.0, "unknown usage ranks first");
            }
        }
    }

    // E2: whatever the pods, the victim is never critical.
    #[test]
    fn the_victim_is_never_critical(mut pods in proptest::collection::vec(candidate_strategy(), 0..12)) {
        rank(&mut pods, Resource::Memory);
        let (reclaim, met, observations) = reclaim_memory(true);
        match victim(&pods, &reclaim, &met, &observations, 0) {
            Some(eviction) => {
                let chosen = pods.iter().find(|c| crate::pod::uid(&c.pod) == eviction.uid).unwrap();
                prop_assert!(!chosen.is_critical());
                prop_assert!(pods.iter().take_while(|c| crate::pod::uid(&c.pod) != eviction.uid).all(Candidate::is_critical));
            }
            None => prop_assert!(pods.iter().all(Candidate::is_critical)),
        }
    }

    // E1: a condition is on whenever one of its thresholds is met, and eviction is
    // driven only by thresholds that are met.
    #[test]
    fn pressure_follows_the_thresholds(available in proptest::collection::vec(0i64..2000, 1..20)) {
        let mut manager = Manager::new(hard(&[("memory.available", "1000"), ("nodefs.available", "50%")]));
        let start = Instant::now();
        for (i, a) in available.iter().enumerate() {
            let observations = Observations::new()
                .with(Signal::MemoryAvailable, *a, 2000)
                .with(Signal::NodeFsAvailable, 2000 - *a, 2000);
            let outcome = manager.observe(&observations, start + Duration::from_secs(i as u64));
            if *a < 1000 {
                prop_assert!(outcome.pressure.memory);
                prop_assert_eq!(outcome.reclaim.unwrap().signal(), Signal::MemoryAvailable);
            }
            if 2000 - *a < 1000 {
                prop_assert!(outcome.pressure.disk);
            }
            if let Some(reclaim) = outcome.reclaim {
                let observed = observations.get(reclaim.signal()).unwrap();
                prop_assert!(reclaim.threshold.met(observed.available, observed.capacity, true));
            }
        }
    }
}

#[test]
fn signals_are_named_as_kubelet_names_them() {
    for signal in Signal::ALL {
        assert_eq!(Signal::parse(signal.as_str()), Some(signal));
    }
    assert_eq!(Signal::parse("memory.Available"), None, "names are exact");
    let condition = |s: Signal| s.condition();
    use super::signal::Condition;
    assert_eq!(condition(Signal::AllocatableMemoryAvailable), Condition::MemoryPressure);
    assert_eq!(condition(Signal::ImageFsInodesFree), Condition::DiskPressure);
    assert_eq!(condition(Signal::PidAvailable), Condition::PidPressure);
    assert_eq!(Signal::NodeFsInodesFree.resource(), Resource::Inodes);
    assert_eq!(Resource::EphemeralStorage.as_str(), "ephemeral-storage");
    let observations =
        Observations::new().with(Signal::PidAvailable, 1, 2).with(Signal::PidAvailable, 3, 4);
    assert_eq!(observations.iter().count(), 1, "a later reading replaces the earlier");
    assert_eq!(
        observations.get(Signal::PidAvailable),
        Some(Observation { available: 3, capacity: 4 })
    );
}
