use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
};

use super::*;

#[test]
fn the_query_gives_the_command_and_the_streams() {
    let request =
        parse(Some("command=sh&command=-c&command=echo%20hi&stdin=1&stdout=true&stderr=1"))
            .unwrap();
    assert_eq!(request.command, ["sh", "-c", "echo hi"]);
    assert!(request.stdin && request.stdout && request.stderr && !request.tty);
    let request = parse(Some("command=date&stdout=1&stderr=0&container=main")).unwrap();
    assert_eq!(request.command, ["date"]);
    assert!(request.stdout && !request.stderr && !request.stdin);
}

#[test]
fn a_tty_merges_stderr_into_stdout() {
    let request = parse(Some("command=sh&stdin=1&stdout=1&stderr=1&tty=1")).unwrap();
    assert!(request.tty && request.stdout && !request.stderr);
}

#[test]
fn a_query_without_a_command_or_a_stream_or_with_a_bad_flag_is_refused() {
    let no_command = parse(Some("stdout=1")).unwrap_err();
    assert!(no_command.contains("command="), "{no_command}");
    assert!(parse(None).is_err());
    let no_stream = parse(Some("command=true")).unwrap_err();
    assert!(no_stream.contains("at least 1 of stdin, stdout, stderr"), "{no_stream}");
    assert!(parse(Some("command=true&tty=1&stderr=1")).is_err(), "stderr goes with the tty");
    let bad = parse(Some("command=true&stdout=yes")).unwrap_err();
    assert!(bad.starts_with("stdout \"yes\""), "{bad}");
}

#[test]
fn run_splits_cmd_at_each_space_from_the_query_or_the_form_body() {
    assert_eq!(
        run::command(Some("cmd=ls%20-l%20/"), b""),
        Some(vec!["ls".into(), "-l".into(), "/".into()])
    );
    assert_eq!(run::command(Some("cmd=echo+a"), b""), Some(vec!["echo".into(), "a".into()]));
    assert_eq!(
        run::command(None, b"cmd=cat%20/etc/hostname"),
        Some(vec!["cat".into(), "/etc/hostname".into()])
    );
    // kubelet's split: two spaces make an empty argument.
    assert_eq!(
        run::command(Some("cmd=a%20%20b"), b""),
        Some(vec!["a".into(), "".into(), "b".into()])
    );
    assert_eq!(run::command(Some("cmd="), b""), None);
    assert_eq!(run::command(None, b""), None);
}

#[test]
fn the_container_id_is_the_part_after_the_runtime() {
    assert_eq!(container_id("containerd://0123abcd"), "0123abcd");
    assert_eq!(container_id("0123abcd"), "0123abcd");
}

fn status_with(state: ContainerState) -> ContainerStatus {
    ContainerStatus { name: "main".into(), state: Some(state), ..ContainerStatus::default() }
}

#[test]
fn a_container_that_is_not_running_is_described_by_its_state() {
    assert_eq!(describe_state(None), "it has not been created yet");
    let waiting = status_with(ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some("ContainerCreating".into()),
            ..Default::default()
        }),
        ..Default::default()
    });
    assert_eq!(describe_state(Some(&waiting)), "waiting: ContainerCreating");
    let terminated = status_with(ContainerState {
        terminated: Some(ContainerStateTerminated {
            reason: Some("Error".into()),
            exit_code: 2,
            ..Default::default()
        }),
        ..Default::default()
    });
    assert_eq!(describe_state(Some(&terminated)), "terminated: Error, exit code 2");
    let running = status_with(ContainerState {
        running: Some(ContainerStateRunning::default()),
        ..Default::default()
    });
    assert_eq!(describe_state(Some(&running)), "running, but without a container ID yet");
    let unknown = status_with(ContainerState::default());
    assert_eq!(describe_state(Some(&unknown)), "its state is not known yet");
}
