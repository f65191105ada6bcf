use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};

use super::*;

fn args() -> LogsArgs {
    LogsArgs {
        pod: "default/web".to_owned(),
        container: None,
        follow: false,
        tail: None,
        previous: false,
        timestamps: false,
        pod_log_dir: PathBuf::from(DEFAULT_POD_LOG_DIR),
    }
}

#[test]
fn the_query_carries_kubelets_parameters() {
    assert!(query(&args(), None).is_empty());
    let all = LogsArgs { follow: true, tail: Some(20), previous: true, timestamps: true, ..args() };
    let q = query(&all, Some(Duration::from_millis(1500)));
    let q: Vec<_> = q.iter().map(|(k, v)| format!("{k}={v}")).collect();
    assert_eq!(
        q,
        ["follow=true", "tailLines=20", "previous=true", "timestamps=true", "sinceSeconds=2"]
    );
    let q = query(&args(), Some(Duration::from_secs(300)));
    assert_eq!(q, [("sinceSeconds", "300".to_owned())]);
}

fn pod(containers: &[&str]) -> Pod {
    Pod {
        spec: Some(PodSpec {
            containers: containers
                .iter()
                .map(|n| Container { name: (*n).to_owned(), ..Container::default() })
                .collect(),
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

#[test]
fn the_container_defaults_to_the_only_one() {
    assert_eq!(only_container(&pod(&["main"]), "default/web").unwrap(), "main");
    let e = only_container(&pod(&["main", "side"]), "default/web").unwrap_err();
    assert_eq!(
        e.to_string(),
        "pod default/web has several containers (main, side): choose one with -c"
    );
    let e = only_container(&pod(&[]), "default/web").unwrap_err();
    assert!(matches!(e, Error::NoContainers { .. }), "{e}");
}
