//! Ephemeral containers (X1, X2, X3): added by a change of the pod, started once in its
//! sandbox beside its target, never restarted or recreated, outside readiness and phase,
//! stopped with the pod.

use k8s_openapi::api::core::v1::EphemeralContainer;

use super::*;

impl P {
    /// Adds the ephemeral container `name` (image busybox), targeting `target`.
    fn debug(mut self, name: &str, target: Option<&str>) -> P {
        let container = EphemeralContainer {
            name: name.into(),
            image: Some("busybox".into()),
            stdin: Some(true),
            tty: Some(true),
            target_container_name: target.map(str::to_owned),
            ..EphemeralContainer::default()
        };
        self.spec().ephemeral_containers.get_or_insert_with(Vec::new).push(container);
        self
    }
}

impl Driver {
    fn ephemeral(&self, name: &str) -> ContainerStatus {
        let list = self.status().ephemeral_container_statuses.unwrap();
        list.into_iter().find(|c| c.name == name).unwrap()
    }
}

/// The start action's target, for the container `name`.
fn target_of(actions: &[Action], name: &str) -> Option<Option<String>> {
    actions.iter().find_map(|a| match a {
        Action::StartContainer { container, target, .. } if container == name => {
            Some(target.clone())
        }
        _ => None,
    })
}

#[test]
fn x1_an_added_ephemeral_container_starts_in_its_targets_namespace_alone() {
    let mut d = Driver::new();
    let p = pod("u1", &[("app", "img:a"), ("other", "img:o")]);
    d.run(&p);
    assert_eq!(d.status().ephemeral_container_statuses, None, "none yet");
    let debugged = p.debug("dbg", Some("app"));
    let actions = d.drive(debugged.input());
    assert_eq!(started(&actions), ["dbg"], "nothing else is recreated");
    assert_eq!(target_of(&actions, "dbg"), Some(Some("app-1".into())));
    assert!(signalled(&actions).is_empty(), "nothing is killed");
    let status = d.ephemeral("dbg");
    assert_eq!(status.image, "busybox");
    assert_eq!(status.container_id.as_deref(), Some("containerd://dbg-3"));
    assert!(status.state.unwrap().running.is_some());
    assert!(!status.ready);
    assert_eq!(status.started, None, "kubelet's prober never sees them");
    assert_eq!(d.container("app").container_id.as_deref(), Some("containerd://app-1"));
    assert_eq!(d.status().container_statuses.unwrap().len(), 2, "not in containerStatuses");
}

#[test]
fn x1_without_a_target_it_joins_no_container() {
    let mut d = Driver::new();
    let p = web();
    d.run(&p);
    let actions = d.drive(p.debug("dbg", None).input());
    assert_eq!(target_of(&actions, "dbg"), Some(None));
}

#[test]
fn x1_a_target_not_running_fails_the_start_as_kubelet_does_and_is_retried() {
    let mut d = Driver::new();
    let p = pod("u1", &[("c", "img:c"), ("app", "img:a")]).policy("Never");
    d.run(&p);
    d.step(d.exit("c-1", 0));
    let actions = d.drive(p.clone().debug("dbg", Some("c")).input());
    assert_eq!(started(&actions), Vec::<String>::new());
    let shown = shown(&actions);
    let event = "Event Warning Failed dbg: Error: unable to find target container c";
    assert!(shown.contains(&event.to_owned()), "{shown:?}");
    let waiting = d.ephemeral("dbg").state.unwrap().waiting.unwrap();
    assert_eq!(waiting.reason.as_deref(), Some("CreateContainerConfigError"));
    assert_eq!(waiting.message.as_deref(), Some("unable to find target container c"));
    assert!(d.wake.is_some(), "tried again");
}

#[test]
fn x1_ephemeral_containers_start_while_init_containers_run() {
    let mut d = Driver::new();
    let mut p = web();
    let init = p.spec().containers[0].clone();
    p.spec().init_containers =
        Some(vec![k8s_openapi::api::core::v1::Container { name: "init".into(), ..init }]);
    let actions = d.drive(p.input());
    assert_eq!(started(&actions), ["init"]);
    let actions = d.drive(p.debug("dbg", None).input());
    assert_eq!(started(&actions), ["dbg"], "the app container still waits");
}

#[test]
fn x2_an_exited_ephemeral_container_is_never_restarted_nor_counted() {
    let mut d = Driver::new();
    let p = web().debug("dbg", Some("c"));
    let actions = d.drive(p.input());
    assert_eq!(started(&actions), ["c", "dbg"]);
    assert_eq!(target_of(&actions, "dbg"), Some(Some("c-1".into())));
    let actions = d.step(d.exit("dbg-2", 1));
    assert_eq!(starts(&actions), 0);
    assert_eq!(d.wake, None, "no restart is scheduled");
    d.pass(secs(600));
    assert_eq!(starts(&d.drive(Input::Tick)), 0);
    let terminated = d.ephemeral("dbg").state.unwrap().terminated.unwrap();
    assert_eq!((terminated.exit_code, terminated.reason.as_deref()), (1, Some("Error")));
    assert_eq!(d.phase(), "Running", "its exit is not the pod's");
    assert_eq!(d.condition("Ready").status, "True");
    // A later change of the pod (a second debugger) starts only the new one.
    let actions = d.drive(p.debug("dbg2", None).input());
    assert_eq!(started(&actions), ["dbg2"]);
    assert_eq!(d.ephemeral("dbg").restart_count, 0);
}

#[test]
fn x2_a_running_ephemeral_container_keeps_the_pod_ready_and_stops_with_it() {
    let mut d = Driver::new();
    let p = web().policy("Never").debug("dbg", None);
    d.drive(p.input());
    assert_eq!(d.condition("ContainersReady").status, "True");
    // The app container completes: the pod is finished and the debugger is stopped.
    let actions = d.step(d.exit("c-1", 0));
    assert_eq!(signalled(&actions), ["Term dbg-2"]);
    assert_eq!(d.phase(), "Succeeded");
}

#[test]
fn x2_a_pod_removed_stops_its_ephemeral_containers() {
    let mut d = Driver::new();
    let p = web().debug("dbg", None);
    d.drive(p.input());
    let actions = d.step(undesired());
    assert_eq!(signalled(&actions), ["Term c-1,dbg-2"]);
}

#[test]
fn x2_an_adopted_ephemeral_container_is_kept_and_an_exited_one_not_rerun() {
    let p = web().debug("dbg", None).debug("dbg2", None);
    let hash = |name: &str| {
        let e = crate::ephemeral::find(&p.0, name).unwrap();
        container_hash(&crate::ephemeral::as_container(e))
    };
    let mut exited = found("d-2", "u1", "dbg2", 0, &hash("dbg2"));
    exited.task = FoundTask::NotRunning { exit_code: 0, exited_at: None };
    let mut d = Driver::with_found(vec![
        found("c-9", "u1", "c", 0, &p.hash("c")),
        found("d-1", "u1", "dbg", 0, &hash("dbg")),
        exited,
    ]);
    let actions = d.drive(p.input());
    assert_eq!(starts(&actions), 0, "{:?}", shown(&actions));
    assert!(d.ephemeral("dbg").state.unwrap().running.is_some());
    assert!(d.ephemeral("dbg2").state.unwrap().terminated.is_some());
}
