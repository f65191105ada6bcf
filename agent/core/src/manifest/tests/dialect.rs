//! S12: manifests read as kubelet reads them (go-yaml's scalars and escapes, merge keys,
//! repeated keys), and keys the pod's types do not know named, never dropped silently.

use super::*;

fn with_volume(volume: &str) -> String {
    manifest("web").replace("spec:\n", &format!("spec:\n  volumes:\n  - {volume}\n"))
}

#[test]
fn s12_leading_zero_integers_are_octal() {
    let text = with_volume(
        "name: info\n    downwardAPI:\n      defaultMode: 0644\n      items: [{path: labels, mode: 0400, fieldRef: {fieldPath: metadata.labels}}]",
    );
    let pod = decode_one(&text, file());
    let volumes = pod.spec.unwrap().volumes.unwrap();
    let downward = volumes[0].downward_api.as_ref().unwrap();
    assert_eq!(downward.default_mode, Some(420));
    assert_eq!(downward.items.as_ref().unwrap()[0].mode, Some(256));
}

#[test]
fn s12_hex_octal_binary_signs_and_separators_are_integers() {
    for (written, value) in
        [("0o644", 420), ("0x1A4", 420), ("0b110100100", 420), ("+420", 420), ("4_20", 420)]
    {
        let text = manifest("web")
            .replace("spec:\n", &format!("spec:\n  terminationGracePeriodSeconds: {written}\n"));
        let pod = decode_one(&text, file());
        assert_eq!(pod.spec.unwrap().termination_grace_period_seconds, Some(value), "{written}");
    }
}

#[test]
fn s12_a_number_or_boolean_in_a_string_field_is_refused_as_kubelet_refuses_it() {
    let text = manifest("web").replace(
        "    image: nginx:1.27\n",
        "    image: nginx:1.27\n    env:\n    - {name: DEBUG, value: yes}\n",
    );
    let error = error(&text);
    assert_eq!(error.position(), Some((10, 28)), "{error}");
    let message = error.to_string();
    assert!(
        message.contains(
            "spec.containers[0].env[0].value: invalid type: boolean `true`, expected a string"
        ),
        "{message}"
    );
    let quoted = text.replace("value: yes", "value: \"yes\"");
    let pod = decode_one(&quoted, file());
    let env = pod.spec.unwrap().containers[0].env.clone().unwrap();
    assert_eq!(env[0].value.as_deref(), Some("yes"));
    let tagged = text.replace("value: yes", "value: !!str 0644");
    let env = decode_one(&tagged, file()).spec.unwrap().containers[0].env.clone().unwrap();
    assert_eq!(env[0].value.as_deref(), Some("0644"));
}

#[test]
fn s12_yaml_1_1_booleans_fill_boolean_fields() {
    for (written, value) in
        [("yes", true), ("On", true), ("Y", true), ("no", false), ("OFF", false), ("False", false)]
    {
        let text =
            manifest("web").replace("spec:\n", &format!("spec:\n  hostNetwork: {written}\n"));
        assert_eq!(decode_one(&text, file()).spec.unwrap().host_network, Some(value), "{written}");
    }
}

#[test]
fn s12_numbers_fill_quantities_and_integral_floats_fill_integers() {
    let text = manifest("web").replace(
        "    image: nginx:1.27\n",
        "    image: nginx:1.27\n    resources:\n      limits: {cpu: 0.5, memory: 1e9}\n      requests: {cpu: 1}\n",
    )
    .replace("spec:\n", "spec:\n  terminationGracePeriodSeconds: 3.0\n");
    let pod = decode_one(&text, file());
    let spec = pod.spec.unwrap();
    let resources = spec.containers[0].resources.clone().unwrap();
    let limits = resources.limits.unwrap();
    assert_eq!(limits["cpu"].0, "0.5");
    assert_eq!(limits["memory"].0, "1000000000");
    assert_eq!(resources.requests.unwrap()["cpu"].0, "1");
    assert_eq!(spec.termination_grace_period_seconds, Some(3));
    let fraction =
        manifest("web").replace("spec:\n", "spec:\n  terminationGracePeriodSeconds: 2.5\n");
    assert!(
        error(&fraction).to_string().contains("invalid type: floating point"),
        "{}",
        error(&fraction)
    );
}

/// kubernetes.io's envars-file-container.yaml writes `\'` in a double-quoted scalar.
#[test]
fn s12_go_yaml_escapes_are_read() {
    let text = manifest("web").replace(
        "    image: nginx:1.27\n",
        "    image: nginx:1.27\n    command: [\"sh\", \"-c\", \"echo \\'quoted\\' \\x41\\u00e9\\\\ \\\"end\\\"\"]\n",
    );
    let pod = decode_one(&text, file());
    let command = pod.spec.unwrap().containers[0].command.clone().unwrap();
    assert_eq!(command[2], "echo 'quoted' Aé\\ \"end\"");
}

#[test]
fn s12_an_escape_go_yaml_does_not_know_is_an_error_at_its_place() {
    let text = manifest("web").replace("image: nginx:1.27", "image: \"nginx\\q\"");
    let error = error(&text);
    assert_eq!(error.position().map(|(line, _)| line), Some(8), "{error}");
    assert!(error.to_string().contains("escape"), "{error}");
}

#[test]
fn s12_a_typo_is_a_warning_with_its_line_and_a_suggestion() {
    let text = manifest("web").replace(
        "    image: nginx:1.27\n",
        "    image: nginx:1.27\n    livenessProbe:\n      tcpSocket: {port: 80}\n      periodSecondz: 3\n",
    );
    let decoded = decode_with_warnings(text.as_bytes(), file(), NODE).unwrap();
    let warnings: Vec<String> = decoded.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        warnings,
        [
            "11:7: warning: spec.containers[0].livenessProbe.periodSecondz: unknown field, ignored as kubelet ignores it (did you mean periodSeconds?)"
        ]
    );
    assert_eq!(decoded.pods.len(), 1);
}

#[test]
fn s12_unknown_fields_everywhere_are_named_and_far_names_get_no_suggestion() {
    let text = manifest("web")
        .replace("kind: Pod\n", "kind: Pod\nextra: 1\n")
        .replace("  name: web\n", "  name: web\n  Labels: {a: b}\n")
        .replace("    image: nginx:1.27\n", "    image: nginx:1.27\n    sidecarMagic: true\n");
    let decoded = decode_with_warnings(text.as_bytes(), file(), NODE).unwrap();
    let fields: Vec<(&str, Option<(usize, usize)>)> =
        decoded.warnings.iter().map(|w| (w.field.as_str(), w.position)).collect();
    assert_eq!(
        fields,
        [
            ("extra", Some((3, 1))),
            ("metadata.Labels", Some((6, 3))),
            ("spec.containers[0].sidecarMagic", Some((11, 5)))
        ]
    );
    assert!(decoded.warnings[1].message.contains("did you mean labels?"), "{:?}", decoded.warnings);
    assert!(!decoded.warnings[2].message.contains("did you mean"), "{:?}", decoded.warnings);
    // Map keys (labels, annotations, resources) are the user's own, never unknown.
    let labels =
        manifest("web").replace("  name: web\n", "  name: web\n  labels: {anything: goes}\n");
    assert!(decode_with_warnings(labels.as_bytes(), file(), NODE).unwrap().warnings.is_empty());
}

#[test]
fn s12_an_unknown_field_in_a_security_context_refuses_the_pod() {
    // kubernetes.io's cgroupOptions example: newer than the API this Outpost knows.
    let text = manifest("web").replace(
        "    image: nginx:1.27\n",
        "    image: nginx:1.27\n    securityContext:\n      runAsNonRoot: true\n      cgroupOptions:\n        mountMode: Unconfined\n",
    );
    let refused = error(&text);
    let Error::Invalid { field, message, position } = &refused else { panic!("{refused:?}") };
    assert_eq!(field, "spec.containers[0].securityContext.cgroupOptions");
    assert_eq!(*position, Some((11, 7)));
    assert!(
        message.contains("Outpost refuses a pod whose security settings it cannot read"),
        "{message}"
    );
    let typo = manifest("web").replace("spec:\n", "spec:\n  securityContext: {runAsUsr: 1000}\n");
    let typo = error(&typo);
    assert!(typo.to_string().contains("spec.securityContext.runAsUsr: unknown field in a securityContext (did you mean runAsUser?)"), "{typo}");
}

#[test]
fn s12_merge_keys_fill_what_the_mapping_does_not_write() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - &base {name: a, image: nginx, imagePullPolicy: Never}\n  - <<: *base\n    name: b\n  - <<: [{name: x, image: busybox}, *base]\n    name: c\n";
    let pod = decode_one(text, file());
    let containers = pod.spec.unwrap().containers;
    let summary: Vec<_> = containers
        .iter()
        .map(|c| {
            (
                c.name.as_str(),
                c.image.as_deref().unwrap_or_default(),
                c.image_pull_policy.as_deref().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [("a", "nginx", "Never"), ("b", "nginx", "Never"), ("c", "busybox", "Never")]
    );
}

#[test]
fn s12_keys_are_made_strings_as_go_yaml_makes_them() {
    // `on` is a boolean to go-yaml, and a JSON key `true`: a label key kubelet would see.
    let text =
        manifest("web").replace("  name: web\n", "  name: web\n  labels: {on: x1, 8080: y1}\n");
    let pod = decode_one(&text, file());
    let labels = pod.metadata.labels.unwrap();
    assert_eq!(labels.get("true").map(String::as_str), Some("x1"));
    assert_eq!(labels.get("8080").map(String::as_str), Some("y1"));
}

#[test]
fn s12_json_manifests_name_unknown_fields_too() {
    let text = "{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"web\"},\n \"spec\": {\"containers\": [{\"name\": \"app\", \"image\": \"nginx\", \"imagePullPolicyy\": \"Never\"}]}}";
    let decoded = decode_with_warnings(text.as_bytes(), file(), NODE).unwrap();
    assert_eq!(decoded.warnings.len(), 1, "{:?}", decoded.warnings);
    assert_eq!(decoded.warnings[0].position, Some((2, 60)));
    assert!(decoded.warnings[0].message.contains("did you mean imagePullPolicy?"));
}

/// An API pod comes as JSON from an API server that may be newer than Outpost.
#[test]
fn s12_the_unknown_fields_of_a_pod_in_json_are_found() {
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "labels": {"any": "label"}},
        "spec": {
            "containers": [{"name": "app", "image": "nginx",
                "securityContext": {"runAsUser": 1000, "cgroupOptions": {"mountMode": "Unconfined"}}}],
            "futureField": true
        },
        "status": {"phase": "Running"}
    });
    let unknown = unknown_fields(&pod);
    assert_eq!(unknown, ["spec.containers[0].securityContext.cgroupOptions", "spec.futureField"]);
    let in_security: Vec<_> = unknown.iter().filter(|f| in_security_context(f)).collect();
    assert_eq!(in_security, ["spec.containers[0].securityContext.cgroupOptions"]);
}
