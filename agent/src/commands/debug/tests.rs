use clap::Parser;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, ContainerStateWaiting};

use super::*;
use crate::cli::{Cli, Command};

fn args(line: &[&str]) -> DebugArgs {
    let mut all = vec!["outpost", "debug"];
    all.extend_from_slice(line);
    match Cli::try_parse_from(all).unwrap().command {
        Command::Debug(args) => args,
        other => panic!("{other:?}"),
    }
}

#[test]
fn x4_the_flags_make_kubectl_debugs_ephemeral_container() {
    let a = args(&["web-edge-1", "--image", "busybox", "--target", "app", "-i", "--", "sh"]);
    assert_eq!(
        container_spec(&a, "debugger-abcde", false),
        json!({"name": "debugger-abcde", "image": "busybox", "stdin": true, "tty": false,
               "terminationMessagePolicy": "File", "targetContainerName": "app",
               "command": ["sh"]})
    );
    let plain = args(&["kube-system/etcd-edge-1", "--image", "busybox:1.36"]);
    let spec = container_spec(&plain, "d", false);
    assert_eq!(spec.get("command"), None);
    assert_eq!(spec.get("targetContainerName"), None);
    assert_eq!(
        attach_query(true),
        [("input", "1".to_owned()), ("output", "1".into()), ("tty", "1".into())]
    );
    assert!(Cli::try_parse_from(["outpost", "debug", "web"]).is_err(), "--image is required");
}

#[test]
fn x4_generated_names_are_kubectls_shape() {
    let name = suffix();
    assert_eq!(name.len(), 5);
    assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()), "{name}");
}

#[test]
fn x4_a_pull_being_tried_is_waited_for_and_a_stuck_start_is_an_error() {
    let waiting = |reason: &str| ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_owned()),
            message: Some("why".to_owned()),
        }),
        ..ContainerState::default()
    };
    for reason in ["ContainerCreating", "ErrImagePull", "PodInitializing"] {
        assert_eq!(not_starting(&waiting(reason)), None, "{reason}");
    }
    assert_eq!(
        not_starting(&waiting("ImagePullBackOff")).as_deref(),
        Some("ImagePullBackOff: why")
    );
    let exited = ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: 127,
            reason: Some("Error".to_owned()),
            ..ContainerStateTerminated::default()
        }),
        ..ContainerState::default()
    };
    assert_eq!(not_starting(&exited).as_deref(), Some("Error (exit code 127)"));
}
