//! Validation after defaulting, modelled on kubelet's static pod validation.

use super::*;

/// The messages of a manifest's errors.
fn messages(text: &str) -> Vec<String> {
    errors(text).iter().map(ToString::to_string).collect()
}

/// Asserts that the manifest's only error is about `field` and says `what`.
fn assert_invalid(text: &str, field: &str, what: &str) {
    let error = error(text);
    let Error::Invalid { field: found, message, .. } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(found, field, "{error}");
    assert!(message.contains(what), "{error}");
}

fn with_container(fields: &str) -> String {
    manifest("web").replace("    image: nginx:1.27\n", &format!("    image: nginx:1.27\n{fields}"))
}

#[test]
fn pod_name_must_be_a_dns_subdomain() {
    assert_invalid(&manifest("Web"), "metadata.name", "\"Web-edge-01\" (the manifest's name");
    assert_invalid(&manifest("web_1"), "metadata.name", "is not a valid name");
    assert_invalid(&manifest("web."), "metadata.name", "is not a valid name");
    assert_invalid(&manifest(&"a".repeat(250)), "metadata.name", "at most 253");
    decode_one(&manifest("web.v1"), file());
}

#[test]
fn a_node_name_that_makes_an_invalid_pod_name_is_reported() {
    let errors = decode(manifest("web").as_bytes(), file(), "edge_01").unwrap_err();
    assert!(errors.to_string().contains("\"web-edge_01\""), "{errors}");
}

#[test]
fn namespace_must_be_a_dns_label() {
    let text = manifest("web").replace("  name: web\n", "  name: web\n  namespace: Kube.System\n");
    assert_invalid(&text, "metadata.namespace", "is not a valid name");
}

#[test]
fn a_pod_needs_a_container() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: []\n";
    assert_invalid(text, "spec.containers", "at least one container");
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\n";
    assert_invalid(text, "spec.containers", "at least one container");
}

#[test]
fn container_names_are_dns_labels() {
    let text = manifest("web").replace("- name: app", "- name: App");
    assert_invalid(&text, "spec.containers[0].name", "is not a valid name");
    let text = manifest("web").replace("- name: app", "- name: \"\"");
    assert_invalid(&text, "spec.containers[0].name", "a name is required");
    let text = manifest("web").replace("- name: app", &format!("- name: {}", "a".repeat(64)));
    assert_invalid(&text, "spec.containers[0].name", "at most 63");
}

#[test]
fn container_names_are_unique_across_containers_and_init_containers() {
    let text = format!(
        "{}  initContainers:\n  - name: app\n    image: busybox\n  - name: init\n    image: busybox\n  - name: init\n    image: busybox\n",
        manifest("web")
    );
    let messages = messages(&text);
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages[0].contains(
            "spec.initContainers[0].name: duplicate name \"app\" (also spec.containers[0])"
        ),
        "{messages:?}"
    );
    assert!(
        messages[1].contains(
            "spec.initContainers[2].name: duplicate name \"init\" (also spec.initContainers[1])"
        ),
        "{messages:?}"
    );
}

#[test]
fn every_container_needs_an_image() {
    let text = manifest("web").replace("    image: nginx:1.27\n", "");
    assert_invalid(&text, "spec.containers[0].image", "required");
    let text = format!("{}  initContainers:\n  - name: init\n    image: \" \"\n", manifest("web"));
    assert_invalid(&text, "spec.initContainers[0].image", "required");
}

#[test]
fn ports_are_in_range() {
    let ok = with_container(
        "    ports:\n    - containerPort: 80\n      hostPort: 0\n    - containerPort: 65535\n      hostPort: 65535\n",
    );
    decode_one(&ok, file());
    assert_invalid(
        &with_container("    ports:\n    - containerPort: 0\n"),
        "spec.containers[0].ports[0].containerPort",
        "1 to 65535",
    );
    assert_invalid(
        &with_container("    ports:\n    - containerPort: 80\n    - containerPort: 65536\n"),
        "spec.containers[0].ports[1].containerPort",
        "65536 is out of range",
    );
    assert_invalid(
        &with_container("    ports:\n    - containerPort: 80\n      hostPort: -1\n"),
        "spec.containers[0].ports[0].hostPort",
        "-1 is out of range",
    );
}

#[test]
fn restart_policy_is_always_on_failure_or_never() {
    for policy in ["Always", "OnFailure", "Never"] {
        let text = format!("{}  restartPolicy: {policy}\n", manifest("web"));
        decode_one(&text, file());
    }
    let text = format!("{}  restartPolicy: Sometimes\n", manifest("web"));
    assert_invalid(&text, "spec.restartPolicy", "use Always, OnFailure or Never");
}

#[test]
fn volume_names_are_unique_dns_labels() {
    let text = format!(
        "{}  volumes:\n  - name: data\n    emptyDir: {{}}\n  - name: Data\n    emptyDir: {{}}\n  - name: data\n    emptyDir: {{}}\n",
        manifest("web")
    );
    let messages = messages(&text);
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages[0].contains("spec.volumes[1].name: \"Data\" is not a valid name"),
        "{messages:?}"
    );
    assert!(
        messages[1]
            .contains("spec.volumes[2].name: duplicate name \"data\" (also spec.volumes[0])"),
        "{messages:?}"
    );
}

#[test]
fn volume_mounts_refer_to_declared_volumes() {
    let mounts = "    volumeMounts:\n    - name: data\n      mountPath: /data\n    - name: cache\n      mountPath: \"\"\n";
    let text =
        format!("{}  volumes:\n  - name: data\n    emptyDir: {{}}\n", with_container(mounts));
    let messages = messages(&text);
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages[0]
            .contains("spec.containers[0].volumeMounts[1].name: volume \"cache\" is not declared"),
        "{messages:?}"
    );
    assert!(
        messages[1].contains("spec.containers[0].volumeMounts[1].mountPath: required"),
        "{messages:?}"
    );
}

#[test]
fn all_problems_of_a_pod_are_reported_at_their_fields() {
    let text = format!(
        "# a comment\n\n{}  restartPolicy: Sometimes\n  initContainers:\n  - name: App\n",
        manifest("Web")
    );
    let errors = errors(&text);
    let fields: Vec<_> = errors
        .iter()
        .map(|error| match error {
            Error::Invalid { field, .. } => field.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        fields,
        [
            "metadata.name",
            "spec.restartPolicy",
            "spec.initContainers[0].name",
            "spec.initContainers[0].image"
        ]
    );
    let positions: Vec<_> = errors.iter().map(Error::position).collect();
    // The name's line; restartPolicy's; the init container's name; its item (no image).
    assert_eq!(positions, [Some((6, 3)), Some((11, 3)), Some((13, 5)), Some((13, 5))]);
}

#[test]
fn problems_of_a_list_item_name_and_point_at_the_item() {
    let text = "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: a}\n  spec: {containers: [{name: app, image: nginx}]}\n- metadata: {name: b}\n  spec: {containers: [{name: app}]}\n";
    let error = error(text);
    assert_eq!(error.position(), Some((7, 23)), "the container, which has no image");
    assert!(error.to_string().contains("items[1].spec.containers[0].image: required"), "{error}");

    let json = r#"{"apiVersion": "v1", "kind": "PodList", "items": [
  {"metadata": {"name": "a"}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}},
  {"metadata": {"name": "b"}, "spec": {"containers": [{"name": "app"}]}}]}"#;
    let error = super::error(json);
    assert_eq!(error.position(), Some((3, 55)), "the container, which has no image");
    assert!(error.to_string().contains("items[1].spec.containers[0].image: required"), "{error}");
}

#[test]
fn a1_probes_and_hooks_that_cannot_run_are_refused() {
    let probe = "    livenessProbe:\n      httpGet: {path: /healthz, port: metrics}\n";
    assert_invalid(
        &with_container(probe),
        "spec.containers[0].livenessProbe",
        "\"metrics\" is not the name",
    );
    let both =
        "    readinessProbe:\n      exec: {command: [\"true\"]}\n      tcpSocket: {port: 80}\n";
    assert_invalid(
        &with_container(both),
        "spec.containers[0].readinessProbe",
        "more than one handler",
    );
    let tls = "    startupProbe:\n      grpc: {port: 2379, mode: TLS}\n";
    assert_invalid(&with_container(tls), "spec.containers[0].startupProbe", "grpc.mode \"TLS\"");
    let threshold =
        "    livenessProbe:\n      exec: {command: [\"true\"]}\n      successThreshold: 2\n";
    assert_invalid(
        &with_container(threshold),
        "spec.containers[0].livenessProbe.successThreshold",
        "must be 1",
    );
    let signal = "    lifecycle:\n      stopSignal: SIGUSR1\n";
    assert_invalid(
        &with_container(signal),
        "spec.containers[0].lifecycle.stopSignal",
        "SIGTERM only",
    );
    let hook = "    lifecycle:\n      preStop:\n        exec: {command: []}\n";
    assert_invalid(
        &with_container(hook),
        "spec.containers[0].lifecycle.preStop",
        "exec.command is empty",
    );
}

#[test]
fn probes_and_hooks_as_real_manifests_carry_them_are_accepted() {
    // kubeadm's etcd probes, and kubernetes.io's lifecycle example.
    let fields = "    ports:\n    - {name: http, containerPort: 80}\n    livenessProbe:\n      failureThreshold: 8\n      httpGet: {host: 127.0.0.1, path: /health, port: 2381, scheme: HTTP}\n      initialDelaySeconds: 10\n      periodSeconds: 10\n      timeoutSeconds: 15\n    readinessProbe:\n      httpGet: {path: /, port: http}\n    startupProbe:\n      grpc: {port: 2379}\n    lifecycle:\n      postStart:\n        exec: {command: [\"/bin/sh\", \"-c\", \"echo Hello > /usr/share/message\"]}\n      preStop:\n        sleep: {seconds: 5}\n";
    decode_one(&with_container(fields), file());
}

#[test]
fn hostname_override_is_a_subdomain_without_set_hostname_as_fqdn_or_host_network() {
    let with = |fields: &str| format!("{}{fields}", manifest("web"));
    decode_one(&with("  hostnameOverride: web-1.example.internal\n"), file());
    decode_one(&with("  hostname: web\n  hostnameOverride: other\n"), file());
    let long = format!("  hostnameOverride: {}\n", "a".repeat(65));
    assert_invalid(&with(&long), "spec.hostnameOverride", "use at most 64");
    assert_invalid(
        &with("  hostnameOverride: Web_1\n"),
        "spec.hostnameOverride",
        "is not a valid name",
    );
    assert_invalid(&with("  hostnameOverride: \"\"\n"), "spec.hostnameOverride", "is empty");
    assert_invalid(
        &with("  hostnameOverride: web\n  setHostnameAsFQDN: true\n"),
        "spec.setHostnameAsFQDN",
        "cannot be set with spec.hostnameOverride",
    );
    assert_invalid(
        &with("  hostnameOverride: web\n  hostNetwork: true\n"),
        "spec.hostnameOverride",
        "spec.hostNetwork: true",
    );
}

/// A1: a static pod's `subPath`/`subPathExpr` as kube-apiserver checks them: one of the
/// two, each relative and inside the volume.
#[test]
fn a1_sub_path_and_sub_path_expr_are_exclusive_and_stay_inside_the_volume() {
    let with = |mount: &str| {
        let pod = with_container(&format!(
            "    volumeMounts:\n    - name: data\n      mountPath: /data\n{mount}"
        ));
        format!("{pod}  volumes:\n  - name: data\n    emptyDir: {{}}\n")
    };
    decode_one(&with("      subPathExpr: $(POD_NAME)\n"), file());
    let field = "spec.containers[0].volumeMounts[0].subPathExpr";
    assert_invalid(
        &with("      subPath: logs\n      subPathExpr: $(POD_NAME)\n"),
        field,
        "mutually exclusive",
    );
    assert_invalid(&with("      subPathExpr: ../$(POD_NAME)\n"), field, "must not contain '..'");
    let field = "spec.containers[0].volumeMounts[0].subPath";
    assert_invalid(&with("      subPath: /etc\n"), field, "must be a relative path");
}

/// A1: a static pod's `fileKeyRef` names a declared volume, a relative path in it, and a
/// key an env file can hold.
#[test]
fn a1_file_key_ref_names_a_declared_volume_a_path_inside_it_and_a_valid_key() {
    let with = |selector: &str| {
        let pod = with_container(&format!(
            "    env:\n    - name: DB_URL\n      valueFrom:\n        fileKeyRef: {selector}\n"
        ));
        format!("{pod}  volumes:\n  - name: config\n    emptyDir: {{}}\n")
    };
    decode_one(&with("{volumeName: config, path: app.env, key: DB_URL}"), file());
    let field = "spec.containers[0].env[0].valueFrom.fileKeyRef";
    assert_invalid(&with("{volumeName: other, path: app.env, key: DB_URL}"), field, "not declared");
    let path = format!("{field}.path");
    assert_invalid(&with("{volumeName: config, path: ../app.env, key: DB_URL}"), &path, "'..'");
    let key = format!("{field}.key");
    assert_invalid(&with("{volumeName: config, path: app.env, key: \"A=B\"}"), &key, "'='");
    let long = format!("{{volumeName: config, path: app.env, key: {}}}", "K".repeat(129));
    assert_invalid(&with(&long), &key, "128 characters");
}
