use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

fn pod(containers: &[&str], annotation: Option<&str>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            annotations: annotation.map(|name| {
                [(DEFAULT_CONTAINER_ANNOTATION.to_owned(), name.to_owned())].into_iter().collect()
            }),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: containers
                .iter()
                .map(|name| Container { name: (*name).to_owned(), ..Container::default() })
                .collect(),
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

#[test]
fn the_only_container_is_the_default() {
    assert_eq!(default_container(&pod(&["main"], None)), Some(("main".into(), None)));
}

#[test]
fn of_several_the_first_is_the_default_and_the_others_are_named() {
    assert_eq!(
        default_container(&pod(&["app", "sidecar"], None)),
        Some(("app".into(), Some(vec!["app".into(), "sidecar".into()])))
    );
}

#[test]
fn the_annotation_chooses_when_it_names_a_container() {
    assert_eq!(
        default_container(&pod(&["app", "sidecar"], Some("sidecar"))),
        Some(("sidecar".into(), None))
    );
    assert_eq!(
        default_container(&pod(&["app", "sidecar"], Some("gone"))),
        Some(("app".into(), Some(vec!["app".into(), "sidecar".into()])))
    );
    assert_eq!(default_container(&pod(&[], None)), None);
}

fn args(command: &[&str], stdin: bool) -> ExecArgs {
    ExecArgs {
        pod: "default/web".into(),
        container: None,
        stdin,
        tty: false,
        command: command.iter().map(|s| (*s).to_owned()).collect(),
        client: crate::cli::ClientArgs::default(),
    }
}

/// N3: the streams go by kubelet's names (`input`, `output`, `error`, `tty`), which the
/// agent's `/exec` reads back as a kubelet would.
#[test]
fn n3_the_query_has_one_command_per_argument_and_kubelets_stream_names() {
    let query = query(&args(&["sh", "-c", "echo hi"], true), false);
    let pairs: Vec<(&str, &str)> = query.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(
        pairs,
        [
            ("command", "sh"),
            ("command", "-c"),
            ("command", "echo hi"),
            ("output", "1"),
            ("error", "1"),
            ("input", "1"),
        ]
    );
    // The server reads it back as it was meant.
    let encoded = form_urlencoded::Serializer::new(String::new()).extend_pairs(&query).finish();
    let (options, command) = crate::api::streams::StreamOptions::parse(Some(&encoded)).unwrap();
    assert_eq!(command, ["sh", "-c", "echo hi"]);
    assert!(options.stdin && options.stdout && options.stderr && !options.tty);
}

#[test]
fn n3_with_a_tty_stderr_is_not_asked_for() {
    let query = query(&args(&["sh"], false), true);
    let names: Vec<&str> = query.iter().map(|(k, _)| *k).collect();
    assert_eq!(names, ["command", "output", "tty"]);
}
