use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, Pod, PodCondition, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;

use super::*;

fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

fn running() -> ContainerState {
    ContainerState {
        running: Some(ContainerStateRunning { started_at: Some(Time(t(0))) }),
        ..ContainerState::default()
    }
}

fn waiting(reason: &str) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_owned()),
            ..ContainerStateWaiting::default()
        }),
        ..ContainerState::default()
    }
}

fn terminated(code: i32, reason: Option<&str>, signal: Option<i32>) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: code,
            reason: reason.map(str::to_owned),
            signal,
            finished_at: Some(Time(t(-300))),
            ..ContainerStateTerminated::default()
        }),
        ..ContainerState::default()
    }
}

fn cs(name: &str, state: ContainerState, ready: bool, restarts: i32) -> ContainerStatus {
    ContainerStatus {
        name: name.to_owned(),
        state: Some(state),
        ready,
        restart_count: restarts,
        ..ContainerStatus::default()
    }
}

fn container(name: &str) -> Container {
    Container { name: name.to_owned(), ..Container::default() }
}

/// A pod with containers `a`, `b`, ... one per status, in phase `phase`.
fn pod(phase: &str, statuses: Vec<ContainerStatus>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("web".to_owned()),
            namespace: Some("default".to_owned()),
            creation_timestamp: Some(Time(t(-3600 * 50))),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: statuses.iter().map(|s| container(&s.name)).collect(),
            node_name: Some("edge-1".to_owned()),
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some(phase.to_owned()),
            container_statuses: Some(statuses),
            ..PodStatus::default()
        }),
    }
}

fn row(pod: &Pod) -> PodRow {
    pod_row(pod, t(0))
}

#[test]
fn a_running_pod_shows_its_phase_and_ready_containers() {
    let p = pod("Running", vec![cs("a", running(), true, 0), cs("b", running(), false, 0)]);
    let r = row(&p);
    assert_eq!((r.status.as_str(), r.ready.as_str(), r.restarts.as_str()), ("Running", "1/2", "0"));
    assert_eq!((r.age.as_str(), r.node.as_str(), r.ip.as_str()), ("2d2h", "edge-1", "<none>"));
}

#[test]
fn a_waiting_reason_wins_over_the_phase() {
    let p = pod("Running", vec![cs("a", waiting("CrashLoopBackOff"), false, 5)]);
    assert_eq!(row(&p).status, "CrashLoopBackOff");
    let p = pod("Pending", vec![cs("a", waiting("ErrImagePull"), false, 0)]);
    assert_eq!(row(&p).status, "ErrImagePull");
    let p = pod("Pending", vec![cs("a", waiting("ContainerCreating"), false, 0)]);
    assert_eq!(row(&p).status, "ContainerCreating");
}

#[test]
fn the_first_containers_reason_shows_when_several_have_one() {
    let p = pod(
        "Running",
        vec![
            cs("a", waiting("ImagePullBackOff"), false, 0),
            cs("b", waiting("CrashLoopBackOff"), false, 0),
        ],
    );
    assert_eq!(row(&p).status, "ImagePullBackOff");
}

#[test]
fn terminated_containers_show_their_reason_exit_code_or_signal() {
    let p = pod("Succeeded", vec![cs("a", terminated(0, Some("Completed"), None), false, 0)]);
    assert_eq!(row(&p).status, "Completed");
    let p = pod("Failed", vec![cs("a", terminated(1, Some("Error"), None), false, 0)]);
    assert_eq!(row(&p).status, "Error");
    let p = pod("Failed", vec![cs("a", terminated(3, None, None), false, 0)]);
    assert_eq!(row(&p).status, "ExitCode:3");
    let p = pod("Failed", vec![cs("a", terminated(137, None, Some(9)), false, 0)]);
    assert_eq!(row(&p).status, "Signal:9");
    let p = pod("Running", vec![cs("a", terminated(137, Some("OOMKilled"), None), false, 2)]);
    assert_eq!(row(&p).status, "OOMKilled");
}

#[test]
fn completed_with_a_container_still_running_is_running_or_not_ready() {
    let statuses = vec![
        cs("a", terminated(0, Some("Completed"), None), false, 0),
        cs("b", running(), true, 0),
    ];
    let mut p = pod("Running", statuses);
    assert_eq!(row(&p).status, "NotReady", "no Ready condition");
    p.status.as_mut().unwrap().conditions = Some(vec![PodCondition {
        type_: "Ready".to_owned(),
        status: "True".to_owned(),
        ..PodCondition::default()
    }]);
    assert_eq!(row(&p).status, "Running");
}

#[test]
fn a_pod_being_deleted_is_terminating() {
    let mut p = pod("Running", vec![cs("a", running(), true, 0)]);
    p.metadata.deletion_timestamp = Some(Time(t(0)));
    assert_eq!(row(&p).status, "Terminating");
    p.status.as_mut().unwrap().reason = Some("NodeLost".to_owned());
    assert_eq!(row(&p).status, "Unknown");
}

#[test]
fn the_status_reason_of_the_pod_replaces_the_phase() {
    let mut p = pod("Failed", vec![cs("a", running(), false, 0)]);
    p.status.as_mut().unwrap().reason = Some("Evicted".to_owned());
    assert_eq!(row(&p).status, "Evicted");
}

fn with_init(mut p: Pod, inits: Vec<ContainerStatus>, sidecars: &[&str]) -> Pod {
    let spec = p.spec.as_mut().unwrap();
    spec.init_containers = Some(
        inits
            .iter()
            .map(|s| Container {
                restart_policy: sidecars.contains(&s.name.as_str()).then(|| "Always".to_owned()),
                ..container(&s.name)
            })
            .collect(),
    );
    p.status.as_mut().unwrap().init_container_statuses = Some(inits);
    p
}

#[test]
fn init_containers_show_which_one_runs_or_why_it_failed() {
    let main = || vec![cs("main", waiting("PodInitializing"), false, 0)];
    let done = || cs("i0", terminated(0, Some("Completed"), None), false, 0);
    let p = with_init(pod("Pending", main()), vec![done(), cs("i1", running(), false, 0)], &[]);
    assert_eq!(row(&p).status, "Init:1/2");
    assert_eq!(row(&p).ready, "0/1");
    let p = with_init(
        pod("Pending", main()),
        vec![cs("i0", waiting("CrashLoopBackOff"), false, 4)],
        &[],
    );
    assert_eq!(
        (row(&p).status.as_str(), row(&p).restarts.as_str()),
        ("Init:CrashLoopBackOff", "4")
    );
    let p = with_init(
        pod("Pending", main()),
        vec![cs("i0", terminated(2, Some("Error"), None), false, 0)],
        &[],
    );
    assert_eq!(row(&p).status, "Init:Error");
    let p =
        with_init(pod("Pending", main()), vec![cs("i0", terminated(2, None, None), false, 0)], &[]);
    assert_eq!(row(&p).status, "Init:ExitCode:2");
    let p = with_init(
        pod("Pending", main()),
        vec![cs("i0", terminated(2, None, Some(15)), false, 0)],
        &[],
    );
    assert_eq!(row(&p).status, "Init:Signal:15");
    let p = with_init(
        pod("Pending", main()),
        vec![cs("i0", waiting("PodInitializing"), false, 0)],
        &[],
    );
    assert_eq!(row(&p).status, "Init:0/1");
}

#[test]
fn finished_init_containers_leave_the_containers_to_speak() {
    let done = cs("i0", terminated(0, Some("Completed"), None), false, 0);
    let p = with_init(pod("Running", vec![cs("main", running(), true, 1)]), vec![done], &[]);
    assert_eq!((row(&p).status.as_str(), row(&p).ready.as_str()), ("Running", "1/1"));
}

#[test]
fn a_running_sidecar_counts_as_a_container() {
    let sidecar = ContainerStatus { started: Some(true), ..cs("log", running(), true, 2) };
    let p =
        with_init(pod("Running", vec![cs("main", running(), true, 1)]), vec![sidecar], &["log"]);
    let r = row(&p);
    assert_eq!((r.status.as_str(), r.ready.as_str(), r.restarts.as_str()), ("Running", "2/2", "3"));
}

#[test]
fn restarts_say_how_long_ago_the_last_one_ended() {
    let mut a = cs("a", running(), true, 3);
    a.last_state = Some(terminated(1, Some("Error"), None));
    let p = pod("Running", vec![a]);
    assert_eq!(row(&p).restarts, "3 (5m ago)");
    let p = pod("Running", vec![cs("a", running(), true, 3)]);
    assert_eq!(row(&p).restarts, "3", "no last state: no time");
}

#[test]
fn age_falls_back_to_config_seen_then_start_time() {
    let mut p = pod("Running", vec![cs("a", running(), true, 0)]);
    p.metadata.creation_timestamp = None;
    assert_eq!(row(&p).age, "<unknown>");
    p.status.as_mut().unwrap().start_time = Some(Time(t(-90)));
    assert_eq!(row(&p).age, "90s");
    p.metadata.annotations = Some(
        [
            (CONFIG_SEEN.to_owned(), t(-600).to_string()),
            (CONFIG_SOURCE.to_owned(), "url".to_owned()),
        ]
        .into(),
    );
    assert_eq!((row(&p).age.as_str(), row(&p).source.as_str()), ("10m", "url"));
}

#[test]
fn a_pod_without_status_is_pending() {
    let mut p = pod("Running", vec![]);
    p.status = None;
    p.spec.as_mut().unwrap().containers = vec![container("a")];
    let r = row(&p);
    assert_eq!(
        (r.status.as_str(), r.ready.as_str(), r.source.as_str()),
        ("Pending", "0/1", "<none>")
    );
}

#[test]
fn human_durations_are_kubectls() {
    let cases = [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (59, "59s"),
        (119, "119s"),
        (120, "2m"),
        (125, "2m5s"),
        (599, "9m59s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 20 * 60, "3h20m"),
        (8 * 3600, "8h"),
        (47 * 3600 + 59 * 60, "47h"),
        (48 * 3600, "2d"),
        (3 * 86400 + 4 * 3600, "3d4h"),
        (8 * 86400, "8d"),
        (729 * 86400, "729d"),
        (730 * 86400, "2y"),
        (760 * 86400, "2y30d"),
        (8 * 365 * 86400, "8y"),
        (20 * 365 * 86400, "20y"),
    ];
    for (seconds, want) in cases {
        assert_eq!(human_duration(SignedDuration::from_secs(seconds)), want, "{seconds}s");
    }
}

proptest! {
    #[test]
    fn a_human_duration_has_at_most_two_units_and_never_grows_backwards(a in 0i64..400_000_000, b in 0i64..400_000_000) {
        let (lo, hi) = (a.min(b), a.max(b));
        let text = human_duration(SignedDuration::from_secs(lo));
        let units = text.chars().filter(|c| c.is_ascii_alphabetic()).count();
        prop_assert!((1..=2).contains(&units), "{text}");
        let leading = |s: &str| -> i64 { s.chars().take_while(char::is_ascii_digit).collect::<String>().parse().unwrap() };
        let unit = |s: &str| -> i64 {
            match s.chars().find(char::is_ascii_alphabetic) {
                Some('s') => 1, Some('m') => 60, Some('h') => 3600, Some('d') => 86400, _ => 365 * 86400,
            }
        };
        let hi_text = human_duration(SignedDuration::from_secs(hi));
        prop_assert!(leading(&text) * unit(&text) <= leading(&hi_text) * unit(&hi_text), "{text} > {hi_text}");
    }
}

#[test]
fn tables_align_columns_three_spaces_apart() {
    let rows = vec![
        vec!["NAME".to_owned(), "READY".to_owned(), "STATUS".to_owned()],
        vec!["web-edge-1".to_owned(), "1/1".to_owned(), "Running".to_owned()],
        vec!["db".to_owned(), "0/1".to_owned(), "".to_owned()],
    ];
    assert_eq!(
        table(&rows),
        "NAME         READY   STATUS\nweb-edge-1   1/1     Running\ndb           0/1\n"
    );
}
