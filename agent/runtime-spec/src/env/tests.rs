use super::super::tests::{context, image, pod};
use super::*;

fn env_of(yaml: &str, image_env: &str) -> Result<Vec<String>> {
    let pod = pod(yaml);
    let image = image(&format!(
        r#"{{"architecture":"amd64","os":"linux","rootfs":{{"type":"layers","diff_ids":[]}},"config":{{"Env":{image_env}}}}}"#
    ));
    let container = &pod.spec.as_ref().unwrap().containers[0];
    let at = Subject::container(&pod, &container.name);
    environment(&context(&pod), container, image.config().as_ref(), &[], &Default::default(), &at)
        .map(|e| e.entries)
}

fn env(vars: &str) -> Vec<String> {
    env_of(
        &format!("spec: {{containers: [{{name: app, image: b, env: {vars}}}]}}"),
        r#"["PATH=/bin"]"#,
    )
    .unwrap()
}

fn env_error(vars: &str) -> String {
    let yaml = format!("spec: {{containers: [{{name: app, image: b, env: {vars}}}]}}");
    env_of(&yaml, "[]").unwrap_err().to_string()
}

#[test]
fn default_path_when_the_image_has_none() {
    let yaml = "spec: {containers: [{name: app, image: b, env: [{name: A, value: a}]}]}";
    assert_eq!(env_of(yaml, r#"["HOME=/root"]"#).unwrap(), [DEFAULT_PATH, "HOME=/root", "A=a"]);
    assert_eq!(env_of(yaml, r#"["PATH=/x"]"#).unwrap(), ["PATH=/x", "A=a"]);
}

#[test]
fn image_env_then_container_env_in_place() {
    let yaml = "spec: {containers: [{name: app, image: b, env: [{name: B, value: mine}, {name: C, value: c}, {name: B, value: again}]}]}";
    let entries = env_of(yaml, r#"["A=1","B=image","PATH=/bin"]"#).unwrap();
    assert_eq!(entries, ["A=1", "B=again", "PATH=/bin", "C=c"]);
}

#[test]
fn values_expand_earlier_container_vars_only() {
    let entries = env(
        "[{name: A, value: x}, {name: B, value: '$(A)-$(LATER)-$(PATH)-$$(A)'}, {name: LATER, value: y}, {name: EMPTY}]",
    );
    assert_eq!(entries, ["PATH=/bin", "A=x", "B=x-$(LATER)-$(PATH)-$(A)", "LATER=y", "EMPTY="]);
}

#[test]
fn field_refs() {
    let yaml = r#"
metadata: {labels: {app: web}, annotations: {note: hi}}
spec:
  serviceAccountName: robot
  containers:
  - name: app
    image: b
    env:
    - {name: NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: NS, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
    - {name: UID, valueFrom: {fieldRef: {fieldPath: metadata.uid}}}
    - {name: APP, valueFrom: {fieldRef: {fieldPath: "metadata.labels['app']"}}}
    - {name: MISSING, valueFrom: {fieldRef: {fieldPath: "metadata.labels['nope']"}}}
    - {name: NOTE, valueFrom: {fieldRef: {fieldPath: "metadata.annotations['note']"}}}
    - {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
    - {name: SA, valueFrom: {fieldRef: {fieldPath: spec.serviceAccountName}}}
    - {name: IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
    - {name: IPS, valueFrom: {fieldRef: {fieldPath: status.podIPs}}}
    - {name: HOST, valueFrom: {fieldRef: {fieldPath: status.hostIP}}}
"#;
    assert_eq!(
        env_of(yaml, r#"["PATH=/bin"]"#).unwrap(),
        [
            "PATH=/bin",
            "NAME=web-node1",
            "NS=default",
            "UID=0123456789abcdef",
            "APP=web",
            "MISSING=",
            "NOTE=hi",
            "NODE=node1",
            "SA=robot",
            "IP=10.88.0.5",
            "IPS=10.88.0.5",
            "HOST=192.168.1.10",
        ]
    );
}

#[test]
fn unsupported_field_paths() {
    for path in ["metadata.labels", "spec.containers", "status.phase", "metadata.labels['x"] {
        let error = env_error(&format!(
            "[{{name: X, valueFrom: {{fieldRef: {{fieldPath: \"{path}\"}}}}}}]"
        ));
        assert!(error.contains(&format!("fieldRef {path:?} is not supported")), "{error}");
        assert!(error.starts_with("pod default/web-node1 container app: env X"), "{error}");
    }
}

#[test]
fn an_empty_source_and_an_env_file_not_read() {
    let error = env_error("[{name: P, valueFrom: {fileKeyRef: {volumeName: v, path: p, key: k}}}]");
    assert!(error.contains("env P: fileKeyRef: no file \"p\" in volume \"v\""), "{error}");
    let error = env_error("[{name: P, valueFrom: {}}]");
    assert!(error.contains("valueFrom has no source"), "{error}");
}

fn resource_env(resources: &str, field: &str) -> Result<Vec<String>> {
    let yaml = format!(
        "spec: {{containers: [{{name: app, image: b, resources: {resources}, env: [{{name: R, valueFrom: {{resourceFieldRef: {field}}}}}]}}, {{name: side, image: b, resources: {{limits: {{memory: 1Gi}}}}}}]}}"
    );
    env_of(&yaml, r#"["PATH=/bin"]"#).map(|entries| entries[1..].to_vec())
}

#[test]
fn resource_field_refs() {
    let resources = "{limits: {cpu: 1500m, memory: 64Mi}, requests: {cpu: 250m}}";
    let value = |field: &str| resource_env(resources, field).unwrap()[0].clone();
    assert_eq!(value("{resource: limits.cpu}"), "R=2", "1.5 CPU rounds up");
    assert_eq!(value("{resource: limits.cpu, divisor: 1m}"), "R=1500");
    assert_eq!(value("{resource: requests.cpu}"), "R=1");
    assert_eq!(value("{resource: requests.cpu, divisor: 1m}"), "R=250");
    assert_eq!(value("{resource: limits.memory}"), "R=67108864");
    assert_eq!(value("{resource: limits.memory, divisor: 1Mi}"), "R=64");
    assert_eq!(
        value("{resource: requests.memory, divisor: 1Mi}"),
        "R=64",
        "request defaults to the limit"
    );
    assert_eq!(value("{resource: limits.memory, divisor: 1M}"), "R=68");
    assert_eq!(value("{resource: requests.ephemeral-storage}"), "R=0");
    assert_eq!(value("{resource: limits.memory, containerName: side, divisor: 1Mi}"), "R=1024");
}

#[test]
fn resource_field_ref_errors() {
    let error = |field: &str| resource_env("{}", field).unwrap_err().to_string();
    assert!(error("{resource: limits.cpu}").contains("resources.limits.cpu"));
    assert!(error("{resource: limits.gpu}").contains("\"limits.gpu\" is not supported"));
    assert!(error("{resource: cpu}").contains("\"cpu\" is not supported"));
    assert!(error("{resource: requests.cpu, containerName: ghost}").contains("\"ghost\""));
    let bad_divisor = resource_env("{limits: {cpu: 1}}", "{resource: limits.cpu, divisor: x}");
    assert!(
        matches!(bad_divisor, Err(Error::Selector(e)) if matches!(*e, crate::selector::Error::Quantity { .. }))
    );
}

mod objects;
mod services;
