use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
};

use super::locate::{container_id, describe_state};
use super::*;

/// N3: the streams go by kubelet's names, `input`, `output`, `error` and `tty`, with
/// `command` once per argument, as an API server passes them on.
#[test]
fn n3_the_query_gives_the_command_and_the_streams_by_kubelets_names() {
    let (options, command) = StreamOptions::parse(Some(
        "command=sh&command=-c&command=echo%20hi&input=1&output=true&error=1",
    ))
    .unwrap();
    assert_eq!(command, ["sh", "-c", "echo hi"]);
    assert!(options.stdin && options.stdout && options.stderr && !options.tty);
    let (options, command) =
        StreamOptions::parse(Some("command=date&output=1&error=0&container=main")).unwrap();
    assert_eq!(command, ["date"]);
    assert!(options.stdout && !options.stderr && !options.stdin);
}

/// N3: Outpost's old names are not kubelet's: they ask for no stream.
#[test]
fn n3_stdin_stdout_and_stderr_are_not_kubelets_parameters() {
    let refused = StreamOptions::parse(Some("command=true&stdin=1&stdout=1&stderr=1"))
        .unwrap_err()
        .to_string();
    assert!(refused.contains("at least 1 of stdin, stdout, stderr"), "{refused}");
}

#[test]
fn n3_a_tty_merges_stderr_into_stdout() {
    let (options, _) =
        StreamOptions::parse(Some("command=sh&input=1&output=1&error=1&tty=1")).unwrap();
    assert!(options.tty && options.stdout && !options.stderr);
}

#[test]
fn n3_a_query_without_a_stream_or_with_a_bad_flag_is_refused() {
    assert!(StreamOptions::parse(None).is_err());
    let no_stream = StreamOptions::parse(Some("command=true")).unwrap_err().to_string();
    assert!(no_stream.contains("at least 1 of stdin, stdout, stderr"), "{no_stream}");
    let bad = StreamOptions::parse(Some("command=true&output=yes")).unwrap_err().to_string();
    assert!(bad.starts_with("output \"yes\""), "{bad}");
    // Attach has no command: the streams alone are a valid query.
    let (options, command) = StreamOptions::parse(Some("output=1&error=1")).unwrap();
    assert!(command.is_empty() && options.stdout && options.stderr);
}

/// N3: kubelet's `port` parameter, repeated or comma-separated, in order.
#[test]
fn n3_port_forward_takes_the_ports_of_every_port_parameter() {
    assert_eq!(port_forward::ports(Some("port=80")), Ok(vec![80]));
    assert_eq!(port_forward::ports(Some("port=80,8080&port=9090")), Ok(vec![80, 8080, 9090]));
    assert_eq!(port_forward::ports(Some("port=65535&other=1")), Ok(vec![65535]));
    for (query, expected) in [
        (None, "is required"),
        (Some("ports=80"), "is required"),
        (Some("port="), "cannot be empty"),
        (Some("port=0"), "must be > 0"),
        (Some("port=65536"), "is not a port"),
        (Some("port=80,,81"), "is not a port"),
        (Some("port=http"), "is not a port"),
    ] {
        let error = port_forward::ports(query).unwrap_err().to_string();
        assert!(error.contains(expected), "{query:?}: {error}");
    }
}

/// N3: port `i` has data channel `2i` and error channel `2i+1`; a client writes only to
/// data channels of ports it asked for.
#[test]
fn n3_port_forward_channels_pair_up_per_port() {
    use port_forward::{data_channel, error_channel, port_index};
    assert_eq!((data_channel(0), error_channel(0)), (0, 1));
    assert_eq!((data_channel(3), error_channel(3)), (6, 7));
    assert_eq!(data_channel(port_forward::MAX_PORTS - 1), 254);
    assert_eq!(port_index(0, 2), Some(0));
    assert_eq!(port_index(2, 2), Some(1));
    assert_eq!(port_index(1, 2), None, "an error channel");
    assert_eq!(port_index(4, 2), None, "a port not asked for");
    for index in 0..port_forward::MAX_PORTS {
        assert_eq!(port_index(data_channel(index), port_forward::MAX_PORTS), Some(index));
        assert_eq!(port_index(error_channel(index), port_forward::MAX_PORTS), None);
    }
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

fn status_with(state: ContainerState) -> k8s_openapi::api::core::v1::ContainerStatus {
    k8s_openapi::api::core::v1::ContainerStatus {
        name: "main".into(),
        state: Some(state),
        ..k8s_openapi::api::core::v1::ContainerStatus::default()
    }
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
