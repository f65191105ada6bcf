use k8s_openapi::api::core::v1::{
    Container, ContainerPort, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, Event, EventSource, ExecAction, HTTPGetAction, Pod,
    PodCondition, PodSpec, PodStatus, Probe, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;

use super::render;

fn t(seconds: i64) -> Timestamp {
    // Thursday 2027-01-14 08:00:00 UTC
    Timestamp::from_second(1_799_913_600 + seconds).unwrap()
}

fn fixture() -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("web-edge-1".to_owned()),
            namespace: Some("default".to_owned()),
            uid: Some("0123abcd".to_owned()),
            labels: Some([("app".to_owned(), "web".to_owned())].into()),
            annotations: Some(
                [
                    ("kubernetes.io/config.source".to_owned(), "file".to_owned()),
                    ("kubernetes.io/config.hash".to_owned(), "0123abcd".to_owned()),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some("edge-1".to_owned()),
            containers: vec![
                Container {
                    name: "main".to_owned(),
                    image: Some("busybox:1".to_owned()),
                    ports: Some(vec![ContainerPort {
                        container_port: 8080,
                        ..ContainerPort::default()
                    }]),
                    volume_mounts: Some(vec![VolumeMount {
                        name: "data".to_owned(),
                        mount_path: "/data".to_owned(),
                        read_only: Some(true),
                        ..VolumeMount::default()
                    }]),
                    liveness_probe: Some(Probe {
                        http_get: Some(HTTPGetAction {
                            path: Some("/healthz".to_owned()),
                            port: IntOrString::Int(8080),
                            ..HTTPGetAction::default()
                        }),
                        initial_delay_seconds: Some(3),
                        period_seconds: Some(3),
                        ..Probe::default()
                    }),
                    readiness_probe: Some(Probe {
                        exec: Some(ExecAction {
                            command: Some(vec!["cat".to_owned(), "/tmp/healthy".to_owned()]),
                        }),
                        failure_threshold: Some(8),
                        ..Probe::default()
                    }),
                    ..Container::default()
                },
                Container {
                    name: "side".to_owned(),
                    image: Some("busybox:1".to_owned()),
                    ..Container::default()
                },
            ],
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".to_owned()),
            host_ip: Some("192.0.2.10".to_owned()),
            pod_ip: Some("10.214.0.5".to_owned()),
            qos_class: Some("BestEffort".to_owned()),
            start_time: Some(Time(t(-600))),
            conditions: Some(vec![
                PodCondition {
                    type_: "Initialized".to_owned(),
                    status: "True".to_owned(),
                    ..PodCondition::default()
                },
                PodCondition {
                    type_: "Ready".to_owned(),
                    status: "False".to_owned(),
                    ..PodCondition::default()
                },
            ]),
            container_statuses: Some(vec![
                ContainerStatus {
                    name: "main".to_owned(),
                    container_id: Some("containerd://c1".to_owned()),
                    image_id: "sha256:aa".to_owned(),
                    ready: true,
                    restart_count: 1,
                    state: Some(ContainerState {
                        running: Some(ContainerStateRunning { started_at: Some(Time(t(-300))) }),
                        ..ContainerState::default()
                    }),
                    last_state: Some(ContainerState {
                        terminated: Some(ContainerStateTerminated {
                            exit_code: 137,
                            signal: Some(9),
                            reason: Some("OOMKilled".to_owned()),
                            started_at: Some(Time(t(-600))),
                            finished_at: Some(Time(t(-301))),
                            ..ContainerStateTerminated::default()
                        }),
                        ..ContainerState::default()
                    }),
                    ..ContainerStatus::default()
                },
                ContainerStatus {
                    name: "side".to_owned(),
                    state: Some(ContainerState {
                        waiting: Some(ContainerStateWaiting {
                            reason: Some("CrashLoopBackOff".to_owned()),
                            message: Some("back-off 40s restarting failed container".to_owned()),
                        }),
                        ..ContainerState::default()
                    }),
                    restart_count: 3,
                    ..ContainerStatus::default()
                },
            ]),
            ..PodStatus::default()
        }),
    }
}

fn event(reason: &str, kind: &str, count: i32, first: i64, last: i64, message: &str) -> Event {
    Event {
        type_: Some(kind.to_owned()),
        reason: Some(reason.to_owned()),
        count: Some(count),
        first_timestamp: Some(Time(t(first))),
        last_timestamp: Some(Time(t(last))),
        message: Some(message.to_owned()),
        source: Some(EventSource { component: Some("kubelet".to_owned()), host: None }),
        ..Event::default()
    }
}

#[test]
fn a_pod_is_described_as_kubectl_does() {
    let events = [
        event(
            "Pulled",
            "Normal",
            1,
            -600,
            -600,
            "Container image \"busybox:1\" already present on machine",
        ),
        event("BackOff", "Warning", 4, -500, -30, "Back-off restarting failed container side"),
    ];
    let text = render(&fixture(), &events, t(0));
    let want = r#"Name:             web-edge-1
Namespace:        default
Priority:         0
Node:             edge-1/192.0.2.10
Source:           file
UID:              0123abcd
Start Time:       Thu, 14 Jan 2027 07:50:00 +0000
Config Hash:      0123abcd
Config Seen:      <none>
Mirror:           <none>
Labels:           app=web
Status:           Running
IP:               10.214.0.5
Containers:
  main:
    Container ID:   containerd://c1
    Image:          busybox:1
    Image ID:       sha256:aa
    Ports:          8080/TCP
    State:          Running
      Started:      Thu, 14 Jan 2027 07:55:00 +0000
    Last State:     Terminated
      Reason:       OOMKilled
      Exit Code:    137
      Signal:       9
      Started:      Thu, 14 Jan 2027 07:50:00 +0000
      Finished:     Thu, 14 Jan 2027 07:54:59 +0000
    Ready:          True
    Restart Count:  1
    Liveness:       http-get http://:8080/healthz delay=3s timeout=1s period=3s #success=1 #failure=3
    Readiness:      exec [cat /tmp/healthy] delay=0s timeout=1s period=10s #success=1 #failure=8
    Mounts:
      /data from data (ro)
  side:
    Image:          busybox:1
    Ports:          <none>
    State:          Waiting
      Reason:       CrashLoopBackOff
      Message:      back-off 40s restarting failed container
    Ready:          False
    Restart Count:  3
    Mounts:         <none>
Conditions:
  Type          Status
  Initialized   True
  Ready         False
QoS Class:        BestEffort
Events:
  Type      Reason    Age                   From      Message
  ----      ------    ---                   ----      -------
  Normal    Pulled    10m                   kubelet   Container image "busybox:1" already present on machine
  Warning   BackOff   30s (x4 over 8m20s)   kubelet   Back-off restarting failed container side
"#;
    assert_eq!(text, want, "got:\n{text}");
}

#[test]
fn a_pod_without_status_or_events_says_so() {
    let mut pod = fixture();
    pod.status = None;
    pod.metadata.deletion_timestamp = Some(Time(t(0)));
    let text = render(&pod, &[], t(0));
    for line in [
        "Node:             edge-1\n",
        "Status:           Terminating\n",
        "Start Time:       <none>\n",
        "    State:          Waiting\n",
        "Conditions:       <none>\n",
        "Events:           <none>\n",
    ] {
        assert!(text.contains(line), "{line:?} in:\n{text}");
    }
    assert!(!text.contains("Last State"), "{text}");
}

#[test]
fn priority_and_its_class_are_shown_as_kubectl_does() {
    let mut pod = fixture();
    let spec = pod.spec.as_mut().unwrap();
    spec.priority_class_name = Some("system-node-critical".to_owned());
    let text = render(&pod, &[], t(0));
    let top: Vec<&str> = text.lines().take(5).collect();
    assert_eq!(
        top,
        [
            "Name:                 web-edge-1",
            "Namespace:            default",
            "Priority:             2000001000",
            "Priority Class Name:  system-node-critical",
            "Node:                 edge-1/192.0.2.10",
        ],
        "{text}"
    );
    assert!(text.contains("\nEvents:               <none>\n"), "{text}");
}

#[test]
fn limits_requests_and_the_qos_class_are_shown_as_kubectl_does() {
    use k8s_openapi::api::core::v1::ResourceRequirements;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let list = |items: &[(&str, &str)]| {
        Some(items.iter().map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned()))).collect())
    };
    let mut pod = fixture();
    let spec = pod.spec.as_mut().unwrap();
    spec.containers[0].resources = Some(ResourceRequirements {
        limits: list(&[("memory", "64Mi"), ("cpu", "200m")]),
        requests: list(&[("cpu", "100m")]),
        ..ResourceRequirements::default()
    });
    spec.containers[1].resources = Some(ResourceRequirements::default());
    pod.status.as_mut().unwrap().qos_class = Some("Burstable".to_owned());
    let text = render(&pod, &[], t(0));
    let want = "    Restart Count:  1
    Limits:
      cpu:     200m
      memory:  64Mi
    Requests:
      cpu:  100m
    Liveness:";
    assert!(text.contains(want), "got:\n{text}");
    let side = text.split("  side:\n").nth(1).unwrap();
    assert!(!side.contains("Limits:") && !side.contains("Requests:"), "none set: {side}");
    assert!(text.contains("\nQoS Class:        Burstable\n"), "got:\n{text}");
}
