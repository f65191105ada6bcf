use super::*;

#[test]
fn pod_dir_names_have_three_parts() {
    assert_eq!(parse_pod_dir("default_web_0a-1b"), Some(("default", "web", "0a-1b")));
    for name in ["default_web", "a_b_c_d", "_web_uid", "default__uid", "default_web_", "plain"] {
        assert_eq!(parse_pod_dir(name), None, "{name}");
    }
}

#[test]
fn live_log_files_are_numbered() {
    assert_eq!(parse_log_file("0.log"), Some(0));
    assert_eq!(parse_log_file("12.log"), Some(12));
    for name in [".log", "a.log", "0.log.20260101-000000", "-1.log", "0.txt", "99999999999.log"] {
        assert_eq!(parse_log_file(name), None, "{name}");
    }
}

#[test]
fn choose_run_takes_the_latest_or_the_one_before() {
    assert_eq!(choose_run(&[0, 2, 1], false), Some(2));
    assert_eq!(choose_run(&[0, 2, 1], true), Some(1));
    assert_eq!(choose_run(&[3, 7], true), Some(3));
    assert_eq!(choose_run(&[4], false), Some(4));
    assert_eq!(choose_run(&[4], true), None);
    assert_eq!(choose_run(&[], false), None);
}

fn mkdirs(root: &Path, dirs: &[&str]) {
    for d in dirs {
        fs::create_dir_all(root.join(d)).unwrap();
    }
}

#[test]
fn pod_dir_lists_the_namespace_when_the_pod_is_missing() {
    let tmp = tempfile::tempdir().unwrap();
    mkdirs(tmp.path(), &["default_web_u1", "default_db_u2", "other_api_u3", "stray"]);
    assert_eq!(pod_dir(tmp.path(), "default", "web").unwrap(), tmp.path().join("default_web_u1"));
    let err = pod_dir(tmp.path(), "default", "cache").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("no logs for pod default/cache"), "{text}");
    assert!(text.ends_with("pods with logs in namespace default: db, web"), "{text}");
    let err = pod_dir(tmp.path(), "empty", "x").unwrap_err();
    assert!(err.to_string().ends_with("namespace empty: (none)"), "{err}");
    let err = pod_dir(&tmp.path().join("missing"), "default", "web").unwrap_err();
    assert!(matches!(err, Error::List { .. }), "{err}");
}

#[test]
fn pod_dir_prefers_the_newest_uid() {
    let tmp = tempfile::tempdir().unwrap();
    mkdirs(tmp.path(), &["default_web_old"]);
    let old = tmp.path().join("default_web_old");
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    fs::File::open(&old).unwrap().set_modified(past).unwrap();
    mkdirs(tmp.path(), &["default_web_new"]);
    assert_eq!(pod_dir(tmp.path(), "default", "web").unwrap(), tmp.path().join("default_web_new"));
}

#[test]
fn container_dir_defaults_to_the_only_one() {
    let tmp = tempfile::tempdir().unwrap();
    let pod = tmp.path().join("default_web_u1");
    let err = container_dir(&pod, "default/web", None).unwrap_err();
    assert!(matches!(err, Error::List { .. }), "{err}");
    fs::create_dir(&pod).unwrap();
    let err = container_dir(&pod, "default/web", None).unwrap_err();
    assert_eq!(err.to_string(), "pod default/web has no container logs yet");
    mkdirs(&pod, &["nginx"]);
    fs::write(pod.join("not-a-container"), "").unwrap();
    assert_eq!(container_dir(&pod, "default/web", None).unwrap(), pod.join("nginx"));
    mkdirs(&pod, &["sidecar"]);
    let err = container_dir(&pod, "default/web", None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "pod default/web has several containers; choose one with -c: nginx, sidecar"
    );
    assert_eq!(container_dir(&pod, "default/web", Some("sidecar")).unwrap(), pod.join("sidecar"));
    let err = container_dir(&pod, "default/web", Some("app")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "container \"app\" not found in pod default/web; its containers: nginx, sidecar"
    );
}

#[test]
fn run_finds_the_current_and_previous_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let err = run(dir, "default/web", "nginx", false).unwrap_err();
    assert_eq!(err.to_string(), "container nginx of pod default/web has no log file yet");
    for name in ["0.log", "0.log.20260101-000000", "1.log", "notes"] {
        fs::write(dir.join(name), "").unwrap();
    }
    assert_eq!(runs(dir).unwrap().len(), 2);
    assert_eq!(run(dir, "default/web", "nginx", false).unwrap(), 1);
    assert_eq!(run(dir, "default/web", "nginx", true).unwrap(), 0);
    fs::remove_file(dir.join("0.log")).unwrap();
    let err = run(dir, "default/web", "nginx", true).unwrap_err();
    assert!(matches!(err, Error::NoPreviousRun { .. }), "{err}");
}
