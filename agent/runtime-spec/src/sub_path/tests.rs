use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::super::tests::{busybox, context, error, first_container, mount, pod, spec};
use super::super::{ContainerFiles, PluginDevices, container_spec};
use super::*;

fn environment(vars: &[(&str, &str)]) -> Environment {
    let container_vars = vars.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect();
    Environment { entries: Vec::new(), container_vars }
}

fn run(expr: &str, vars: &[(&str, &str)]) -> Result<String, Error> {
    let environment = environment(vars);
    expand(expr, &Vars { environment: &environment, devices: &[] })
}

#[test]
fn subpathexpr_expands_the_containers_variables() {
    let vars = [("POD_NAME", "pod1"), ("NS", "default")];
    assert_eq!(run("$(POD_NAME)", &vars).unwrap(), "pod1");
    assert_eq!(run("logs/$(NS)/$(POD_NAME)", &vars).unwrap(), "logs/default/pod1");
    assert_eq!(run("plain", &vars).unwrap(), "plain");
    assert_eq!(run("$$(POD_NAME)", &vars).unwrap(), "$(POD_NAME)", "$$ is an escaped $");
    assert_eq!(run("a$b", &vars).unwrap(), "a$b");
    assert_eq!(run("$(POD_NAME", &vars).unwrap(), "$(POD_NAME", "unclosed: kept");
}

#[test]
fn subpathexpr_missing_or_empty_values_fail_as_kubelets_do() {
    let vars = [("EMPTY", ""), ("POD_NAME", "pod1")];
    let missing = run("$(ZED)/$(EMPTY)/$(POD_NAME)/$(ZED)", &vars).unwrap_err();
    assert_eq!(missing, Error::Missing { names: vec!["EMPTY".to_owned(), "ZED".to_owned()] });
    assert_eq!(missing.to_string(), "missing value for EMPTY, ZED");
}

#[test]
fn subpathexpr_must_stay_in_the_volume() {
    let vars = [("UP", ".."), ("ROOT", "/etc"), ("DEEP", "a/../b")];
    assert_eq!(
        run("$(ROOT)", &vars).unwrap_err().to_string(),
        "error SubPath `/etc` must not be an absolute path"
    );
    assert_eq!(
        run("$(UP)/x", &vars).unwrap_err().to_string(),
        "unable to provision SubPath `../x`: must not contain '..'"
    );
    assert!(matches!(run("$(DEEP)", &vars), Err(Error::Backsteps { .. })));
    assert_eq!(run("a..b/..c", &vars).unwrap(), "a..b/..c", "only a whole `..` part steps out");
}

#[test]
fn subpathexpr_sees_the_devices_variables_after_the_containers() {
    let environment = environment(&[("A", "own")]);
    let devices = [("A".to_owned(), "device".to_owned()), ("B".to_owned(), "dev".to_owned())];
    let vars = Vars { environment: &environment, devices: &devices };
    assert_eq!(expand("$(A)-$(B)", &vars).unwrap(), "own-dev");
}

proptest! {
    /// Whatever the values, an expansion that succeeds is a path inside the volume.
    #[test]
    fn subpathexpr_expansions_never_leave_the_volume(
        value in "[a-z./]{0,12}",
        prefix in "[a-z/.]{0,6}",
    ) {
        let expr = format!("{prefix}$(V)");
        if let Ok(sub_path) = run(&expr, &[("V", &value)]) {
            let joined = Path::new("/volume").join(&sub_path);
            prop_assert!(!sub_path.starts_with('/'));
            prop_assert!(joined.components().all(|c| c != std::path::Component::ParentDir));
            prop_assert!(joined.starts_with("/volume"));
        }
    }
}

/// kubernetes.io's example: each pod writes its logs under its own name.
const POD1: &str = r#"metadata: {name: pod1}
spec:
  containers:
  - name: container1
    env:
    - name: POD_NAME
      valueFrom:
        fieldRef: {apiVersion: v1, fieldPath: metadata.name}
    image: busybox:1.28
    volumeMounts:
    - name: workdir1
      mountPath: /logs
      subPathExpr: $(POD_NAME)
  restartPolicy: Never
  volumes:
  - name: workdir1
    hostPath: {path: /var/log/pods}
"#;

#[test]
fn subpathexpr_binds_the_expanded_path_of_the_volume() {
    let logs = spec(POD1);
    let logs = mount(&logs, "/logs").unwrap();
    assert_eq!(logs.source().as_deref(), Some(Path::new("/var/log/pods/pod1")));

    let pod = pod(POD1);
    let dirs =
        sub_path_dirs(&context(&pod), first_container(&pod), &ContainerFiles::default()).unwrap();
    let volume = PathBuf::from("/var/log/pods");
    assert_eq!(dirs, [SubPathDir { path: volume.join("pod1"), volume }]);
}

#[test]
fn subpathexpr_of_the_devices_variables() {
    let pod = pod(&POD1.replace("$(POD_NAME)", "$(DEVICE)"));
    let files = ContainerFiles {
        devices: PluginDevices {
            env: vec![("DEVICE".to_owned(), "gpu0".to_owned())],
            ..PluginDevices::default()
        },
        ..ContainerFiles::default()
    };
    let spec =
        container_spec(&context(&pod), first_container(&pod), &busybox(), &files, "c1").unwrap();
    let source = mount(&spec, "/logs").unwrap().source().clone();
    assert_eq!(source.as_deref(), Some(Path::new("/var/log/pods/gpu0")));
}

#[test]
fn subpathexpr_errors_name_the_mount_and_kubelets_cause() {
    let missing = error(&POD1.replace("$(POD_NAME)", "$(NODE_NAME)"));
    assert_eq!(
        missing,
        "pod default/pod1 container container1: volumeMounts[0].subPathExpr \"$(NODE_NAME)\": \
         missing value for NODE_NAME"
    );
    let escape = POD1.replace("$(POD_NAME)", "../$(POD_NAME)");
    let escape = error(&escape);
    assert!(escape.ends_with("unable to provision SubPath `../pod1`: must not contain '..'"));
}

#[test]
fn subpathexpr_of_nothing_binds_the_volume_and_needs_no_directory() {
    let yaml = POD1
        .replace("$(POD_NAME)", "$(EMPTY)")
        .replace("    env:\n", "    env:\n    - {name: EMPTY, value: \"\"}\n");
    // An empty value is missing, as kubelet has it.
    assert!(error(&yaml).ends_with("missing value for EMPTY"));
    let escaped = POD1.replace("$(POD_NAME)", "$$");
    let spec = spec(&escaped);
    let source = mount(&spec, "/logs").unwrap().source().clone();
    assert_eq!(source.as_deref(), Some(Path::new("/var/log/pods/$")));
}
