//! Admission in decoding (A1): a field Outpost would not honour rejects the manifest,
//! naming the field, at the field's line; warnings come with the pods.

use super::*;

fn warnings(text: &str) -> Vec<String> {
    match decode_with_warnings(text.as_bytes(), file(), NODE) {
        Ok(decoded) => decoded.warnings.iter().map(ToString::to_string).collect(),
        Err(errors) => panic!("{text}\nwas rejected:\n{errors}"),
    }
}

#[test]
fn a1_an_unsupported_field_is_an_error_with_its_path_and_position() {
    let text = format!(
        "{}---\n{}",
        manifest("a"),
        manifest("b").replace(
            "    image: nginx:1.27\n",
            "    image: nginx:1.27\n    volumeDevices:\n    - {name: d, devicePath: /dev/xvda}\n"
        )
    );
    let errors = decode(text.as_bytes(), file(), NODE).unwrap_err();
    assert_eq!(errors.0.len(), 1, "{errors}");
    let Error::Invalid { field, message, position } = &errors.0[0] else { panic!("{errors:?}") };
    assert_eq!(field, "spec.containers[0].volumeDevices");
    assert_eq!(*position, Some((18, 5)));
    assert!(message.starts_with("not supported: static pods may not refer"), "{message}");
    assert!(
        errors.to_string().starts_with("18:5: spec.containers[0].volumeDevices: not supported: "),
        "{errors}"
    );
}

#[test]
fn a1_list_items_are_refused_with_their_item_prefix() {
    let text = r#"{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
  {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"}, "spec": {"hostUsers": false, "containers": [{"name": "c", "image": "i"}]}}]}"#;
    let error = error(text);
    let Error::Invalid { field, .. } = &error else { panic!("{error:?}") };
    assert_eq!(field, "items[1].spec.hostUsers");
}

#[test]
fn a1_host_dependent_fields_are_left_to_the_node() {
    let text = manifest("web").replace(
        "spec:\n",
        "spec:\n  securityContext:\n    appArmorProfile: {type: RuntimeDefault}\n    sysctls: [{name: net.core.somaxconn, value: \"1024\"}]\n",
    );
    assert_eq!(warnings(&text), Vec::<String>::new());
    let never = text.replace("net.core.somaxconn", "vm.swappiness");
    let error = error(&never);
    assert!(error.to_string().contains("spec.securityContext.sysctls[0].name: forbidden sysctl: \"vm.swappiness\" not allowlisted"), "{error}");
}

#[test]
fn a1_warnings_come_with_the_pods_at_their_field() {
    let text = format!(
        "{}---\n{}",
        manifest("a"),
        manifest("b").replace("spec:\n", "spec:\n  priorityClassName: gold\n")
    );
    assert_eq!(
        warnings(&text),
        [
            "15:3: warning: spec.priorityClassName: priority class \"gold\" is not known without an API server: the pod has priority 0; set spec.priority, or use system-node-critical or system-cluster-critical"
        ]
    );
    assert_eq!(warnings(&manifest("web")), Vec::<String>::new());
}
