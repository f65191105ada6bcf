use std::collections::BTreeMap;

use k8s_openapi::ByteString;

use super::*;
use crate::tests::pod;

fn config_map(data: &[(&str, &str)], binary: &[(&str, &[u8])]) -> Resolution {
    let data: BTreeMap<String, String> =
        data.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let binary: BTreeMap<String, ByteString> =
        binary.iter().map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec()))).collect();
    let object = ConfigMap {
        data: Some(data),
        binary_data: Some(binary).filter(|b| !b.is_empty()),
        ..ConfigMap::default()
    };
    Resolution::Found(Object::ConfigMap(Arc::new(object)))
}

fn secret(data: &[(&str, &[u8])]) -> Resolution {
    let data = data.iter().map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec()))).collect();
    Resolution::Found(Object::Secret(Arc::new(Secret { data: Some(data), ..Secret::default() })))
}

fn token(jwt: &str) -> Resolution {
    Resolution::Found(Object::Token(Arc::from(jwt)))
}

fn cm(name: &str) -> Reference {
    Reference::ConfigMap(name.to_owned())
}

fn sec(name: &str) -> Reference {
    Reference::Secret(name.to_owned())
}

fn sa_token(service_account: &str, audience: &str, expiration_seconds: i64) -> Reference {
    Reference::ServiceAccountToken {
        service_account: service_account.to_owned(),
        audience: audience.to_owned(),
        expiration_seconds,
    }
}

fn resolved(entries: Vec<(Reference, Resolution)>) -> Resolved {
    Resolved(entries.into_iter().collect())
}

/// The payload of the pod's first volume.
fn payload_of(yaml: &str, resolved: &Resolved) -> Result<Option<Payload>, Error> {
    let pod = pod(yaml);
    let volume = &pod.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0];
    payload(&pod, volume, resolved)
}

/// `path: (text, mode)` of a payload.
fn files(payload: Payload) -> Vec<(String, String, u32)> {
    payload
        .into_iter()
        .map(|(path, file)| (path, String::from_utf8(file.data).unwrap(), file.mode))
        .collect()
}

fn volume_files(volume: &str, resolved: &Resolved) -> Vec<(String, String, u32)> {
    let yaml = format!("spec: {{volumes: [{volume}], containers: [{{name: app, image: b}}]}}");
    files(payload_of(&yaml, resolved).unwrap().unwrap())
}

fn volume_error(volume: &str, resolved: &Resolved) -> Error {
    let yaml = format!("spec: {{volumes: [{volume}], containers: [{{name: app, image: b}}]}}");
    payload_of(&yaml, resolved).unwrap_err()
}

fn owned(files: &[(&str, &str, u32)]) -> Vec<(String, String, u32)> {
    files.iter().map(|(p, t, m)| ((*p).to_owned(), (*t).to_owned(), *m)).collect()
}

#[test]
fn v1_references_of_volumes_env_and_pull_secrets() {
    let pod = pod(r#"
spec:
  serviceAccountName: robot
  imagePullSecrets: [{name: pull}, {name: ""}]
  volumes:
  - {name: a, configMap: {name: cm-vol}}
  - {name: b, secret: {secretName: sec-vol}}
  - {name: c, emptyDir: {}}
  - {name: d, downwardAPI: {items: [{path: n, fieldRef: {fieldPath: metadata.name}}]}}
  - name: e
    projected:
      sources:
      - configMap: {name: cm-proj}
      - secret: {name: sec-proj}
      - serviceAccountToken: {path: token}
      - serviceAccountToken: {path: vault, audience: vault, expirationSeconds: 600}
  containers:
  - name: app
    image: b
    envFrom: [{configMapRef: {name: cm-from}}, {secretRef: {name: sec-from}, prefix: S_}]
    env:
    - {name: A, valueFrom: {configMapKeyRef: {name: cm-key, key: k}}}
    - {name: B, valueFrom: {secretKeyRef: {name: sec-key, key: k}}}
    - {name: C, value: c}
  initContainers:
  - {name: init, image: b, env: [{name: D, valueFrom: {secretKeyRef: {name: sec-init, key: k}}}]}
"#);
    let volumes = volume_references(&pod);
    assert_eq!(
        volumes.into_iter().collect::<Vec<_>>(),
        [
            cm("cm-proj"),
            cm("cm-vol"),
            sec("sec-proj"),
            sec("sec-vol"),
            sa_token("robot", "", 3600),
            sa_token("robot", "vault", 600),
        ]
    );
    let app = &pod.spec.as_ref().unwrap().containers[0];
    assert_eq!(
        container_references(app).into_iter().collect::<Vec<_>>(),
        [cm("cm-from"), cm("cm-key"), sec("sec-from"), sec("sec-key")]
    );
    assert_eq!(pull_secret_references(&pod).into_iter().collect::<Vec<_>>(), [sec("pull")]);
    let all = references(&pod);
    assert_eq!(all.len(), 6 + 4 + 1 + 1, "{all:?}");
    assert!(all.contains(&sec("sec-init")));
}

/// D5: an API pod refers to its RuntimeClass (an empty name is no class).
#[test]
fn d5_the_runtime_class_is_a_reference() {
    let with = pod("spec:\n  runtimeClassName: nvidia\n  containers: [{name: a, image: b}]\n");
    let class = Reference::RuntimeClass("nvidia".into());
    assert_eq!(runtime_class_reference(&with), Some(class.clone()));
    assert_eq!(references(&with).into_iter().collect::<Vec<_>>(), [class]);
    let empty = pod("spec:\n  runtimeClassName: \"\"\n  containers: [{name: a, image: b}]\n");
    assert_eq!(runtime_class_reference(&empty), None);
    assert!(references(&empty).is_empty());
}

#[test]
fn v1_the_default_service_account() {
    let pod = pod(
        "spec: {volumes: [{name: t, projected: {sources: [{serviceAccountToken: {path: t}}]}}], containers: []}",
    );
    assert_eq!(
        volume_references(&pod).into_iter().collect::<Vec<_>>(),
        [sa_token("default", "", 3600)]
    );
}

#[test]
fn v1_other_volumes_have_no_payload() {
    let yaml = "spec: {volumes: [{name: e, emptyDir: {}}], containers: []}";
    assert_eq!(payload_of(yaml, &Resolved::default()).unwrap(), None);
    let pod = pod(
        "spec: {volumes: [{name: e, emptyDir: {}}, {name: c, configMap: {name: x}}, {name: s, secret: {secretName: y}}, {name: d, downwardAPI: {}}, {name: p, projected: {}}], containers: []}",
    );
    let kinds: Vec<_> = pod.spec.unwrap().volumes.unwrap().iter().map(kind).collect();
    assert_eq!(
        kinds,
        [
            None,
            Some(Kind::ConfigMap),
            Some(Kind::Secret),
            Some(Kind::DownwardApi),
            Some(Kind::Projected)
        ]
    );
}

#[test]
fn v1_config_map_every_key_with_the_default_mode() {
    let resolved = resolved(vec![(
        cm("cfg"),
        config_map(&[("app.conf", "a=1"), ("b", "2")], &[("bin", b"\x01")]),
    )]);
    assert_eq!(
        volume_files("{name: v, configMap: {name: cfg}}", &resolved),
        owned(&[("app.conf", "a=1", 0o644), ("b", "2", 0o644), ("bin", "\u{1}", 0o644)])
    );
    assert_eq!(
        volume_files("{name: v, configMap: {name: cfg, defaultMode: 0o400}}", &resolved),
        owned(&[("app.conf", "a=1", 0o400), ("b", "2", 0o400), ("bin", "\u{1}", 0o400)])
    );
}

#[test]
fn v1_config_map_items_with_paths_and_modes() {
    let resolved =
        resolved(vec![(cm("cfg"), config_map(&[("a", "1"), ("b", "2")], &[("c", b"3")]))]);
    let volume = "{name: v, configMap: {name: cfg, defaultMode: 0o440, items: [{key: a, path: dir/./a.txt, mode: 0o600}, {key: c, path: c}]}}";
    assert_eq!(
        volume_files(volume, &resolved),
        owned(&[("c", "3", 0o440), ("dir/a.txt", "1", 0o600)])
    );
    let missing =
        "{name: v, configMap: {name: cfg, items: [{key: a, path: a}, {key: zz, path: z}]}}";
    assert_eq!(
        volume_error(missing, &resolved).to_string(),
        "configmap references non-existent config key: zz"
    );
    let optional = "{name: v, configMap: {name: cfg, optional: true, items: [{key: a, path: a}, {key: zz, path: z}]}}";
    assert_eq!(volume_files(optional, &resolved), owned(&[("a", "1", 0o644)]));
}

#[test]
fn v1_a_missing_object_fails_unless_optional() {
    let absent = resolved(vec![(cm("cfg"), Resolution::Absent), (sec("s"), Resolution::Absent)]);
    assert_eq!(
        volume_error("{name: v, configMap: {name: cfg}}", &absent).to_string(),
        "configmap \"cfg\" not found"
    );
    assert_eq!(
        volume_error("{name: v, secret: {secretName: s}}", &absent).to_string(),
        "secret \"s\" not found"
    );
    assert!(volume_files("{name: v, configMap: {name: cfg, optional: true}}", &absent).is_empty());
    let items = "{name: v, secret: {secretName: s, optional: true, items: [{key: k, path: k}]}}";
    assert!(volume_files(items, &absent).is_empty());
}

#[test]
fn v1_an_unavailable_object_fails_even_if_optional() {
    let offline = resolved(vec![(cm("cfg"), Resolution::Unavailable("offline".to_owned()))]);
    let error = volume_error("{name: v, configMap: {name: cfg, optional: true}}", &offline);
    assert_eq!(error.to_string(), "couldn't get configMap default/cfg: offline");
    let error = volume_error("{name: v, secret: {secretName: s, optional: true}}", &offline);
    assert_eq!(error.to_string(), "couldn't get secret default/s: not fetched yet");
    let wrong = resolved(vec![(cm("cfg"), token("jwt"))]);
    let error = volume_error("{name: v, configMap: {name: cfg}}", &wrong);
    assert_eq!(error.to_string(), "couldn't get configMap default/cfg: resolved to a token");
}

#[test]
fn v1_secret_bytes_and_items() {
    let resolved =
        resolved(vec![(sec("s"), secret(&[("tls.key", b"\xff\x00key"), ("user", b"admin")]))]);
    let volume = "{name: v, secret: {secretName: s, defaultMode: 0o400}}";
    let pod = pod(&format!("spec: {{volumes: [{volume}], containers: []}}"));
    let payload =
        payload(&pod, &pod.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0], &resolved)
            .unwrap()
            .unwrap();
    assert_eq!(payload["tls.key"], File { data: b"\xff\x00key".to_vec(), mode: 0o400 });
    assert_eq!(payload["user"], File { data: b"admin".to_vec(), mode: 0o400 });
    let missing = "{name: v, secret: {secretName: s, items: [{key: pass, path: p}]}}";
    assert_eq!(
        volume_error(missing, &resolved).to_string(),
        "references non-existent secret key: pass"
    );
}

#[test]
fn v1_paths_are_checked_as_kubelet_does() {
    let resolved = resolved(vec![(cm("cfg"), config_map(&[("a", "1")], &[]))]);
    let error = |path: &str| {
        let volume =
            format!("{{name: v, configMap: {{name: cfg, items: [{{key: a, path: '{path}'}}]}}}}");
        volume_error(&volume, &resolved).to_string()
    };
    assert!(error("/etc/a").contains("must be a relative path"), "{}", error("/etc/a"));
    assert!(error("a/../../b").contains("must not contain '..'"));
    assert!(error("..data/a").contains("must not start with '..'"));
    assert!(error("").contains("must not be empty"));
    assert!(error("./").contains("must name a file"));
    assert!(error(&"x".repeat(256)).contains("at most 255"));
    assert!(error(&"x/".repeat(2100)).contains("at most 4096"));
    let bad_mode = "{name: v, configMap: {name: cfg, defaultMode: 4096}}";
    assert!(volume_error(bad_mode, &resolved).to_string().contains("mode 4096 is not valid"));
    let negative = "{name: v, configMap: {name: cfg, items: [{key: a, path: a, mode: -1}]}}";
    assert!(matches!(volume_error(negative, &resolved), Error::Invalid(_)));
}

#[test]
fn v1_downward_api_fields() {
    let yaml = r#"
metadata:
  labels: {tier: web, app: "x \"y\"\n"}
  annotations: {zeta: "tab\there", alpha: "é\u0001\u200b\U0001F600"}
spec:
  containers: [{name: app, image: b, resources: {limits: {memory: 64Mi, cpu: 500m}}}]
  volumes:
  - name: info
    downwardAPI:
      defaultMode: 0o440
      items:
      - {path: name, fieldRef: {fieldPath: metadata.name}}
      - {path: ns, fieldRef: {fieldPath: metadata.namespace}}
      - {path: uid, fieldRef: {fieldPath: metadata.uid}, mode: 0o400}
      - {path: labels, fieldRef: {fieldPath: metadata.labels}}
      - {path: annotations, fieldRef: {fieldPath: metadata.annotations}}
      - {path: tier, fieldRef: {fieldPath: "metadata.labels['tier']"}}
      - {path: none, fieldRef: {fieldPath: "metadata.annotations['none']"}}
      - {path: mem, resourceFieldRef: {containerName: app, resource: limits.memory, divisor: 1Mi}}
      - {path: cpu, resourceFieldRef: {containerName: app, resource: limits.cpu, divisor: 1m}}
"#;
    let got = files(payload_of(yaml, &Resolved::default()).unwrap().unwrap());
    assert_eq!(
        got,
        owned(&[
            ("annotations", "alpha=\"é\\x01\\u200b😀\"\nzeta=\"tab\\there\"", 0o440),
            ("cpu", "500", 0o440),
            ("labels", "app=\"x \\\"y\\\"\\n\"\ntier=\"web\"", 0o440),
            ("mem", "64", 0o440),
            ("name", "web-node1", 0o440),
            ("none", "", 0o440),
            ("ns", "default", 0o440),
            ("tier", "web", 0o440),
            ("uid", "0123456789abcdef", 0o400),
        ])
    );
}

#[test]
fn v1_go_quoting() {
    assert_eq!(downward_quote("plain"), "\"plain\"");
    assert_eq!(
        downward_quote("a\\b\"\u{7}\u{8}\u{c}\r\u{b}\u{7f}"),
        "\"a\\\\b\\\"\\a\\b\\f\\r\\v\\x7f\""
    );
    assert_eq!(
        downward_quote("\u{a0}\u{feff}\u{e000}\u{10ffff}"),
        "\"\\u00a0\\ufeff\\ue000\\U0010ffff\""
    );
}

fn downward_quote(text: &str) -> String {
    let mut pod = pod(
        "spec: {volumes: [{name: d, downwardAPI: {items: [{path: a, fieldRef: {fieldPath: metadata.annotations}}]}}], containers: []}",
    );
    pod.metadata.annotations = Some([("k".to_owned(), text.to_owned())].into());
    let volume = &pod.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0];
    let payload = payload(&pod, volume, &Resolved::default()).unwrap().unwrap();
    String::from_utf8(payload["a"].data.clone()).unwrap().strip_prefix("k=").unwrap().to_owned()
}

#[test]
fn v1_downward_api_errors() {
    let error = |item: &str| {
        let yaml = format!(
            "spec: {{volumes: [{{name: d, downwardAPI: {{items: [{item}]}}}}], containers: [{{name: app, image: b}}]}}"
        );
        payload_of(&yaml, &Resolved::default()).unwrap_err().to_string()
    };
    assert_eq!(
        error("{path: n, fieldRef: {fieldPath: spec.nodeName}}"),
        "unsupported fieldPath: spec.nodeName"
    );
    assert!(
        error("{path: n}").contains("volume \"d\" file \"n\": set fieldRef or resourceFieldRef")
    );
    let no_container = error("{path: m, resourceFieldRef: {resource: limits.memory}}");
    assert!(
        no_container.contains("volume \"d\" file \"m\": resourceFieldRef names container \"\""),
        "{no_container}"
    );
    let no_limit =
        error("{path: m, resourceFieldRef: {containerName: app, resource: limits.memory}}");
    assert!(no_limit.contains("resourceFieldRef limits.memory is not set"), "{no_limit}");
}

#[test]
fn v1_projected_sources() {
    let resolved = resolved(vec![
        (cm("kube-root-ca.crt"), config_map(&[("ca.crt", "CA")], &[])),
        (sec("s"), secret(&[("pass", b"p")])),
        (cm("gone"), Resolution::Absent),
        (sa_token("default", "", 3607), token("jwt-a")),
        (sa_token("default", "vault", 600), token("jwt-b")),
    ]);
    let volume = r#"{name: kube-api-access-x, projected: {defaultMode: 0o444, sources: [
        {serviceAccountToken: {path: token, expirationSeconds: 3607}},
        {configMap: {name: kube-root-ca.crt, items: [{key: ca.crt, path: ca.crt}]}},
        {downwardAPI: {items: [{path: namespace, fieldRef: {fieldPath: metadata.namespace}}]}},
        {secret: {name: s, items: [{key: pass, path: sub/pass, mode: 0o400}]}},
        {configMap: {name: gone, optional: true}},
        {serviceAccountToken: {path: vault/token, audience: vault, expirationSeconds: 600}}]}}"#;
    assert_eq!(
        volume_files(volume, &resolved),
        owned(&[
            ("ca.crt", "CA", 0o444),
            ("namespace", "default", 0o444),
            ("sub/pass", "p", 0o400),
            ("token", "jwt-a", 0o444),
            ("vault/token", "jwt-b", 0o444),
        ])
    );
    let fs_group = pod(&format!(
        "spec: {{securityContext: {{fsGroup: 2000}}, volumes: [{volume}], containers: []}}"
    ));
    let volume = &fs_group.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0];
    let payload = payload(&fs_group, volume, &resolved).unwrap().unwrap();
    assert_eq!(payload["token"].mode, 0o600, "kubelet's token mode with an fsGroup");
    assert_eq!(payload["ca.crt"].mode, 0o444);
}

#[test]
fn v1_projected_errors() {
    let resolved = resolved(vec![
        (cm("gone"), Resolution::Absent),
        (sa_token("default", "", 3600), Resolution::Absent),
        (sa_token("robot", "", 3600), Resolution::Unavailable("offline".to_owned())),
    ]);
    let error = |sources: &str| {
        volume_error(&format!("{{name: p, projected: {{sources: [{sources}]}}}}"), &resolved)
            .to_string()
    };
    assert_eq!(error("{configMap: {name: gone}}"), "configmap \"gone\" not found");
    assert_eq!(error("{serviceAccountToken: {path: t}}"), "serviceaccount \"default\" not found");
    assert_eq!(
        error("{clusterTrustBundle: {path: b, name: x}}"),
        "ClusterTrustBundles are not known yet: not fetched yet"
    );
    let yaml = "spec: {serviceAccountName: robot, volumes: [{name: p, projected: {sources: [{serviceAccountToken: {path: t}}]}}], containers: []}";
    assert_eq!(
        payload_of(yaml, &resolved).unwrap_err().to_string(),
        "couldn't get token of serviceaccount default/robot: offline"
    );
}

mod trust_bundles;
