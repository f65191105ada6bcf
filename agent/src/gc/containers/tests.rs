use std::collections::HashMap;

use super::{instance, log_path, remove_logs};
use crate::runtime::container::Listed;

#[tokio::test]
async fn a_dead_containers_logs_go_with_it_rotated_ones_included() {
    let dir = tempfile::tempdir().unwrap();
    let names = ["1.log", "1.log.20260101-120000", "1.log.20260101-120000.2.gz", "10.log", "2.log"];
    for name in names {
        std::fs::write(dir.path().join(name), "x").unwrap();
    }
    remove_logs(&dir.path().join("1.log")).await;
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["10.log", "2.log"]);
}

fn listed(labels: &[(&str, &str)]) -> Listed {
    Listed {
        id: "abc".into(),
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<HashMap<_, _>>(),
        created_at: Some(prost_types::Timestamp { seconds: 1_700_000_000, nanos: 0 }),
        image: "docker.io/library/busybox:latest".into(),
        task: None,
    }
}

#[test]
fn a_listed_container_is_an_instance_of_its_pods_container_and_has_a_log() {
    let l = listed(&[
        ("io.kubernetes.pod.uid", "u1"),
        ("io.kubernetes.pod.namespace", "default"),
        ("io.kubernetes.pod.name", "web"),
        ("io.kubernetes.container.name", "c"),
        ("io.kubernetes.container.restartCount", "3"),
    ]);
    let i = instance(&l).unwrap();
    assert_eq!(
        (i.pod_uid.as_str(), i.container.as_str(), i.restart_count, i.running),
        ("u1", "c", 3, false)
    );
    assert_eq!(i.created_at.as_second(), 1_700_000_000);
    let log = log_path(std::path::Path::new("/var/log/pods"), &l).unwrap();
    assert_eq!(log, std::path::Path::new("/var/log/pods/default_web_u1/c/3.log"));
    assert!(instance(&listed(&[("io.kubernetes.pod.uid", "u1")])).is_none(), "no container name");
}
