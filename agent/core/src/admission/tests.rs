use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::review::Review;
use super::table::{CONTAINER, POD, Rule};
use super::*;

mod inventory;
mod restart;

/// A pod from JSON: `spec` and the first container's fields merged over a minimal pod.
fn pod(spec: Value, container: Value) -> Pod {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    });
    for (key, value) in spec.as_object().into_iter().flatten() {
        pod["spec"][key] = value.clone();
    }
    for (key, value) in container.as_object().into_iter().flatten() {
        pod["spec"]["containers"][0][key] = value.clone();
    }
    serde_json::from_value(pod).expect("a valid pod")
}

fn findings(pod: &Pod) -> Vec<(String, Severity, &'static str)> {
    review(pod, &NodeFacts::default(), Source::File)
        .into_iter()
        .map(|f| (f.field, f.severity, f.reason))
        .collect()
}

fn refused(field: &str) -> Vec<(String, Severity, &'static str)> {
    vec![(field.to_owned(), Severity::Refused, UNSUPPORTED_FIELD)]
}

fn warned(field: &str) -> Vec<(String, Severity, &'static str)> {
    vec![(field.to_owned(), Severity::Warning, UNSUPPORTED_FIELD)]
}

#[test]
fn a1_a_plain_pod_has_no_findings() {
    let pod = pod(
        json!({
            "restartPolicy": "Always",
            "hostPID": true,
            "tolerations": [{"operator": "Exists", "effect": "NoExecute"}],
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "etc", "hostPath": {"path": "/etc"}}],
            "securityContext": {"runAsUser": 1000, "sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}]},
        }),
        json!({
            "env": [{"name": "A", "value": "1"}, {"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "resources": {"limits": {"cpu": "1", "memory": "64Mi"}, "requests": {"ephemeral-storage": "1Gi"}},
            "volumeMounts": [{"name": "data", "mountPath": "/data", "mountPropagation": "None"}],
            "securityContext": {"procMount": "Default", "seccompProfile": {"type": "RuntimeDefault"}},
        }),
    );
    assert_eq!(findings(&pod), vec![]);
}

/// Every `Refused` line of the table refuses a set value at its path, with the path
/// (list indexes filled in) as the field; an unset value (false, "", [] or {}) is fine.
#[test]
fn a1_each_refused_field_is_refused_with_its_path() {
    let refused_paths = |table: &[(&str, Rule)]| -> Vec<String> {
        table
            .iter()
            .filter(|(_, rule)| matches!(rule, Rule::Refused(_)))
            .map(|(path, _)| (*path).to_owned())
            .collect()
    };
    let pod = Pod::default();
    let facts = NodeFacts::default();
    for (table, paths) in [(POD, refused_paths(POD)), (CONTAINER, refused_paths(CONTAINER))] {
        for path in paths {
            for (value, expected) in [(json!({"set": 1}), 1), (json!(false), 0), (json!([]), 0)] {
                let object = nested(&path, value);
                let mut review = Review::new(&pod, &facts, Source::Api);
                review.walk(table, "", "", &object);
                let field = path.replace("[]", "[0]");
                assert_eq!(review.findings.len(), expected, "{path}: {:?}", review.findings);
                if let Some(finding) = review.findings.first() {
                    assert_eq!(finding.field, field);
                    assert_eq!(finding.severity, Severity::Refused);
                    assert!(finding.message.starts_with(&format!("{field}: not supported: ")));
                }
            }
        }
    }
}

/// `{"a": [{"b": value}]}` for `a[].b`.
fn nested(path: &str, value: Value) -> serde_json::Map<String, Value> {
    let mut value = value;
    for part in path.rsplit('.') {
        let (key, list) = match part.strip_suffix("[]") {
            Some(key) => (key, true),
            None => (part, false),
        };
        let mut object = serde_json::Map::new();
        object.insert(key.to_owned(), if list { json!([value]) } else { value });
        value = Value::Object(object);
    }
    match value {
        Value::Object(object) => object,
        _ => serde_json::Map::new(),
    }
}

#[test]
fn a1_an_unknown_field_is_refused() {
    let pod = Pod::default();
    let facts = NodeFacts::default();
    let mut review = Review::new(&pod, &facts, Source::Api);
    let object = nested("spec.volumes[].newVolumeType", json!({"path": "/x"}));
    review.walk(POD, "", "", &object);
    assert_eq!(review.findings.len(), 1);
    assert_eq!(review.findings[0].field, "spec.volumes[0].newVolumeType");
    assert!(review.findings[0].message.contains("not known to Outpost"));
}

#[test]
fn a1_ignored_fields_are_silent() {
    let pod = pod(
        json!({
            "schedulerName": "custom",
            "preemptionPolicy": "Never",
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
            "automountServiceAccountToken": false,
            "securityContext": {"windowsOptions": {"runAsUserName": "x"}},
        }),
        json!({}),
    );
    assert_eq!(findings(&pod), vec![]);
}

/// K4: the node's admission checks these, so they are neither refused nor warned of.
#[test]
fn k4_node_selector_affinity_tolerations_and_overhead_are_admissions() {
    let pod = pod(json!({"nodeSelector": {"disk": "ssd"}}), json!({}));
    assert_eq!(findings(&pod), vec![]);
    let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]}]}}});
    assert_eq!(findings(&pod_with("affinity", affinity)), vec![]);
    let tolerations = json!([{"key": "k", "operator": "Exists", "effect": "NoExecute"}]);
    assert_eq!(findings(&pod_with("tolerations", tolerations)), vec![]);
    assert_eq!(findings(&pod_with("overhead", json!({"cpu": "10m"}))), vec![]);
}

#[test]
fn a1_ignored_fields_a_user_may_rely_on_warn() {
    assert_eq!(
        findings(&pod_with("enableServiceLinks", json!(true))),
        vec![],
        "K1: enableServiceLinks is honoured, with or without links"
    );
    assert_eq!(findings(&pod_with("enableServiceLinks", json!(false))), vec![]);
    let gates = json!([{"conditionType": "example.com/ready"}]);
    assert_eq!(findings(&pod_with("readinessGates", gates)), warned("spec.readinessGates"));
}

fn pod_with(field: &str, value: Value) -> Pod {
    pod(json!({ field: value }), json!({}))
}

fn container_with(field: &str, value: Value) -> Pod {
    pod(json!({}), json!({ field: value }))
}

#[test]
fn a1_dns_policy_cluster_first_warns_that_it_falls_back() {
    for policy in ["ClusterFirst", "ClusterFirstWithHostNet"] {
        let pod = pod_with("dnsPolicy", json!(policy));
        let found = review(&pod, &NodeFacts::default(), Source::File);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].severity, Severity::Warning);
        assert!(found[0].message.contains("node's resolver"), "{}", found[0].message);
    }
    // K2: a node with cluster DNS gives it.
    let cluster = NodeFacts { cluster_dns: true, ..NodeFacts::default() };
    let pod = pod_with("dnsPolicy", json!("ClusterFirst"));
    assert_eq!(review(&pod, &cluster, Source::File), vec![]);
    assert_eq!(findings(&pod_with("dnsPolicy", json!("Default"))), vec![]);
    assert_eq!(findings(&pod_with("dnsPolicy", json!("None"))), vec![]);
    assert_eq!(findings(&pod_with("dnsPolicy", json!("Cluster"))), refused("spec.dnsPolicy"));
}

#[test]
fn a1_host_users_false_is_refused_true_is_fine() {
    assert_eq!(findings(&pod_with("hostUsers", json!(false))), refused("spec.hostUsers"));
    assert_eq!(findings(&pod_with("hostUsers", json!(true))), vec![]);
}

#[test]
fn a1_os_other_than_linux_is_refused_with_kubelets_reason() {
    assert_eq!(findings(&pod_with("os", json!({"name": "linux"}))), vec![]);
    assert_eq!(
        findings(&pod_with("os", json!({"name": "windows"}))),
        vec![("spec.os.name".to_owned(), Severity::Refused, "PodOSNotSupported")]
    );
}

/// D5: a class is a handler of the node (static pods) or a RuntimeClass (API pods); an
/// unknown one fails the sandbox, as under kubelet, not admission.
#[test]
fn d5_a_runtime_class_is_admitted_from_every_source() {
    let p = pod_with("runtimeClassName", json!("nvidia"));
    for source in [Source::File, Source::Url, Source::Push, Source::Api] {
        assert_eq!(review(&p, &NodeFacts::default(), source), vec![], "{source:?}");
    }
    assert_eq!(findings(&pod_with("runtimeClassName", json!(""))), vec![]);
}

#[test]
fn a1_an_unknown_priority_class_warns_unless_priority_is_set() {
    assert_eq!(findings(&pod_with("priorityClassName", json!("system-node-critical"))), vec![]);
    assert_eq!(
        findings(&pod_with("priorityClassName", json!("high"))),
        warned("spec.priorityClassName")
    );
    let pod = pod(json!({"priorityClassName": "high", "priority": 1000}), json!({}));
    assert_eq!(findings(&pod), vec![]);
}

#[test]
fn priority_is_spec_priority_else_the_builtin_class_else_zero() {
    assert_eq!(priority(&Pod::default()), 0);
    assert_eq!(
        priority(&pod_with("priorityClassName", json!("system-node-critical"))),
        2_000_001_000
    );
    assert_eq!(
        priority(&pod_with("priorityClassName", json!("system-cluster-critical"))),
        2_000_000_000
    );
    assert_eq!(priority(&pod_with("priorityClassName", json!("high"))), 0);
    let pod = pod(json!({"priorityClassName": "system-node-critical", "priority": 7}), json!({}));
    assert_eq!(priority(&pod), 7);
}

fn apparmor(facts: &NodeFacts, pod: &Pod) -> Vec<(String, Severity, &'static str)> {
    review(pod, facts, Source::File).into_iter().map(|f| (f.field, f.severity, f.reason)).collect()
}

#[test]
fn a1_apparmor_is_refused_with_kubelets_reason_where_it_is_not_enabled() {
    let off = NodeFacts::default();
    let on = NodeFacts { apparmor_enabled: true, ..NodeFacts::default() };
    let field = "spec.containers[0].securityContext.appArmorProfile";
    let refused_apparmor = vec![(field.to_owned(), Severity::Refused, "AppArmor")];
    for profile in [
        json!({"type": "RuntimeDefault"}),
        json!({"type": "Localhost", "localhostProfile": "k8s-x"}),
    ] {
        let pod = container_with("securityContext", json!({"appArmorProfile": profile}));
        assert_eq!(apparmor(&off, &pod), refused_apparmor);
        assert_eq!(apparmor(&on, &pod), vec![]);
    }
    let unconfined =
        container_with("securityContext", json!({"appArmorProfile": {"type": "Unconfined"}}));
    assert_eq!(apparmor(&off, &unconfined), vec![]);
    let message = &review(
        &container_with("securityContext", json!({"appArmorProfile": {"type": "RuntimeDefault"}})),
        &off,
        Source::File,
    )[0]
    .message;
    assert!(
        message.starts_with("Cannot enforce AppArmor: AppArmor is not enabled on the host"),
        "{message}"
    );

    let pod_level =
        pod_with("securityContext", json!({"appArmorProfile": {"type": "RuntimeDefault"}}));
    assert_eq!(apparmor(&off, &pod_level)[0].0, "spec.securityContext.appArmorProfile");
    let no_profile =
        container_with("securityContext", json!({"appArmorProfile": {"type": "Localhost"}}));
    assert_eq!(apparmor(&on, &no_profile), refused(&format!("{field}.localhostProfile")));
    let bad = container_with("securityContext", json!({"appArmorProfile": {"type": "Strict"}}));
    assert_eq!(apparmor(&on, &bad), refused(&format!("{field}.type")));
}

fn annotated(key: &str, value: &str) -> Pod {
    let mut pod = pod(json!({}), json!({}));
    pod.metadata.annotations = Some([(key.to_owned(), value.to_owned())].into());
    pod
}

#[test]
fn a1_legacy_apparmor_annotation_is_checked_as_the_field() {
    let off = NodeFacts::default();
    let on = NodeFacts { apparmor_enabled: true, ..NodeFacts::default() };
    let key = "container.apparmor.security.beta.kubernetes.io/app";
    let field = format!("metadata.annotations[{key}]");
    for profile in ["runtime/default", "localhost/k8s-x"] {
        assert_eq!(
            apparmor(&off, &annotated(key, profile)),
            vec![(field.clone(), Severity::Refused, "AppArmor")]
        );
        assert_eq!(apparmor(&on, &annotated(key, profile)), vec![]);
    }
    assert_eq!(apparmor(&off, &annotated(key, "unconfined")), vec![]);
    assert_eq!(apparmor(&on, &annotated(key, "localhost/")), refused(&field));
    assert_eq!(apparmor(&on, &annotated("example.com/other", "anything")), vec![]);
}

#[test]
fn a1_seccomp_profiles_and_legacy_annotations() {
    let field = "spec.containers[0].securityContext.seccompProfile";
    for profile in [
        json!({"type": "RuntimeDefault"}),
        json!({"type": "Unconfined"}),
        json!({"type": "Localhost", "localhostProfile": "p.json"}),
    ] {
        assert_eq!(
            findings(&container_with("securityContext", json!({"seccompProfile": profile}))),
            vec![]
        );
    }
    let no_file =
        container_with("securityContext", json!({"seccompProfile": {"type": "Localhost"}}));
    assert_eq!(findings(&no_file), refused(&format!("{field}.localhostProfile")));
    let bad = pod_with("securityContext", json!({"seccompProfile": {"type": "Strict"}}));
    assert_eq!(findings(&bad), refused("spec.securityContext.seccompProfile.type"));

    for key in [
        "seccomp.security.alpha.kubernetes.io/pod",
        "container.seccomp.security.alpha.kubernetes.io/app",
    ] {
        for profile in ["runtime/default", "docker/default", "unconfined", "localhost/p.json"] {
            assert_eq!(findings(&annotated(key, profile)), vec![]);
        }
        assert_eq!(
            findings(&annotated(key, "strict")),
            refused(&format!("metadata.annotations[{key}]"))
        );
    }
}

fn sysctl_pod(name: &str, host_network: bool) -> Pod {
    pod(
        json!({"hostNetwork": host_network, "securityContext": {"sysctls": [
            {"name": "kernel.shm_rmid_forced", "value": "1"}, {"name": name, "value": "1"}]}}),
        json!({}),
    )
}

#[test]
fn a1_sysctls_outside_the_safe_set_are_forbidden_unless_allowed() {
    let field = "spec.securityContext.sysctls[1].name";
    let forbidden = vec![(field.to_owned(), Severity::Refused, "SysctlForbidden")];
    let default = NodeFacts::default();
    let check = |facts: &NodeFacts, pod: &Pod| apparmor(facts, pod);
    for safe in super::sysctl::SAFE {
        assert_eq!(check(&default, &sysctl_pod(safe, false)), vec![], "{safe}");
    }
    assert_eq!(check(&default, &sysctl_pod("net/ipv4/tcp_syncookies", false)), vec![]);
    let unsafe_pod = sysctl_pod("net.core.somaxconn", false);
    assert_eq!(check(&default, &unsafe_pod), forbidden);
    let message = &review(&unsafe_pod, &default, Source::File)[0].message;
    assert!(
        message.starts_with("forbidden sysctl: \"net.core.somaxconn\" not allowlisted"),
        "{message}"
    );

    let by_name = NodeFacts {
        allowed_unsafe_sysctls: vec!["net.core.somaxconn".into()],
        ..NodeFacts::default()
    };
    let by_prefix =
        NodeFacts { allowed_unsafe_sysctls: vec!["net.core.*".into()], ..NodeFacts::default() };
    assert_eq!(check(&by_name, &unsafe_pod), vec![]);
    assert_eq!(check(&by_prefix, &unsafe_pod), vec![]);
    assert_eq!(check(&by_prefix, &sysctl_pod("net.ipv4.ip_forward", false)), forbidden);

    // kubelet: a net sysctl with the host's network, an ipc one with the host's IPC.
    let message =
        &review(&sysctl_pod("net.ipv4.tcp_syncookies", true), &default, Source::File)[0].message;
    assert!(message.starts_with(
        "forbidden sysctl: \"net.ipv4.tcp_syncookies\" not allowed with host net enabled"
    ));
    let host_ipc = pod(
        json!({"hostIPC": true, "securityContext": {"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]}}),
        json!({}),
    );
    assert_eq!(check(&default, &host_ipc)[0].2, "SysctlForbidden");
}

#[test]
fn allowed_unsafe_sysctls_must_be_namespaced() {
    for pattern in
        ["net.core.somaxconn", "net.*", "kernel.msgmax", "fs.mqueue.*", "kernel.shm_rmid_forced"]
    {
        assert_eq!(check_allowed_unsafe_sysctl(pattern), Ok(()), "{pattern}");
    }
    for pattern in ["vm.swappiness", "kernel.*", "fs.file-max"] {
        assert!(check_allowed_unsafe_sysctl(pattern).is_err(), "{pattern}");
    }
}

#[test]
fn a1_resources_other_than_cpu_memory_and_ephemeral_storage_are_refused() {
    let at = "spec.containers[0].resources";
    let pod = |resources: Value| container_with("resources", resources);
    let storage =
        json!({"limits": {"ephemeral-storage": "1Gi"}, "requests": {"ephemeral-storage": "1Mi"}});
    assert_eq!(findings(&pod(storage)), vec![]);
    assert_eq!(
        findings(&pod(json!({"limits": {"hugepages-2Mi": "2Mi"}}))),
        refused(&format!("{at}.limits.hugepages-2Mi"))
    );
    assert_eq!(
        findings(&pod(json!({"limits": {"unprefixed": "1"}}))),
        refused(&format!("{at}.limits.unprefixed"))
    );
    assert_eq!(
        findings(&pod(json!({"claims": [{"name": "gpu"}]}))),
        refused(&format!("{at}.claims"))
    );
}

#[test]
fn q2_pod_level_cpu_and_memory_are_supported_and_nothing_else() {
    let resources = json!({"requests": {"cpu": "100m", "memory": "64Mi"},
        "limits": {"cpu": "1", "memory": "128Mi"}});
    assert_eq!(findings(&pod_with("resources", resources)), []);
    assert_eq!(
        findings(&pod_with("resources", json!({"limits": {"ephemeral-storage": "1Gi"}}))),
        refused("spec.resources.limits.ephemeral-storage")
    );
    assert_eq!(
        findings(&pod_with("resources", json!({"requests": {"hugepages-2Mi": "2Mi"}}))),
        refused("spec.resources.requests.hugepages-2Mi")
    );
    assert_eq!(
        findings(&pod_with("resources", json!({"claims": [{"name": "gpu"}]}))),
        refused("spec.resources.claims")
    );
}

/// D2: extended resources are admitted (the device manager gives them), held to the API
/// server's validation: whole numbers, a request only with an equal limit.
#[test]
fn d2_extended_resources_are_whole_numbers_requested_as_limited() {
    let at = "spec.containers[0].resources";
    let pod = |resources: Value| container_with("resources", resources);
    let messages = |pod: &Pod| -> Vec<String> {
        review(pod, &NodeFacts::default(), Source::File).into_iter().map(|f| f.message).collect()
    };
    let serial = json!({"limits": {"squat.ai/serial": "1"}, "requests": {"squat.ai/serial": "1"}});
    assert_eq!(findings(&pod(serial)), []);
    assert_eq!(findings(&pod(json!({"limits": {"nvidia.com/gpu": "2"}}))), []);
    let half = pod(json!({"limits": {"nvidia.com/gpu": "500m"}}));
    assert_eq!(
        messages(&half),
        [format!("{at}.limits.nvidia.com/gpu: Invalid value: \"500m\": must be an integer")]
    );
    let unlimited = pod(json!({"requests": {"nvidia.com/gpu": "1"}}));
    assert_eq!(
        messages(&unlimited),
        [format!(
            "{at}.requests.nvidia.com/gpu: Forbidden: Limit must be set for non overcommitable resources"
        )]
    );
    let unequal =
        pod(json!({"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "2"}}));
    assert_eq!(
        messages(&unequal),
        [format!(
            "{at}.requests.nvidia.com/gpu: Invalid value: \"2\": must be equal to nvidia.com/gpu limit of 1"
        )]
    );
}

#[test]
fn d6_mount_propagation_host_to_container_and_bidirectional_for_privileged_containers() {
    let at = "spec.containers[0].volumeMounts[0].mountPropagation";
    let with = |propagation: &str, privileged: bool| {
        pod(
            json!({"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}),
            json!({
                "volumeMounts": [{"name": "root", "mountPath": "/host", "mountPropagation": propagation}],
                "securityContext": {"privileged": privileged},
            }),
        )
    };
    assert_eq!(findings(&with("HostToContainer", false)), []);
    assert_eq!(findings(&with("None", false)), []);
    assert_eq!(findings(&with("Bidirectional", true)), []);
    assert_eq!(findings(&with("Bidirectional", false)), refused(at));
    let why = review(&with("Bidirectional", false), &NodeFacts::default(), Source::File);
    assert_eq!(
        why[0].message,
        format!(
            "{at}: Forbidden: Bidirectional mount propagation is available only to privileged \
             containers"
        ),
        "the API server's validation message"
    );
}

#[test]
fn a1_mount_options_other_than_the_defaults_are_refused() {
    let at = "spec.containers[0].volumeMounts[0]";
    let pod = |mount: Value| {
        let mut mount_json = json!({"name": "data", "mountPath": "/data"});
        for (key, value) in mount.as_object().into_iter().flatten() {
            mount_json[key] = value.clone();
        }
        pod(
            json!({"volumes": [{"name": "data", "emptyDir": {}}]}),
            json!({"volumeMounts": [mount_json]}),
        )
    };
    assert_eq!(
        findings(&pod(json!({"mountPropagation": "Sideways"}))),
        refused(&format!("{at}.mountPropagation"))
    );
    assert_eq!(
        findings(&pod(json!({"recursiveReadOnly": "Always", "readOnly": true}))),
        refused(&format!("{at}.recursiveReadOnly"))
    );
    assert_eq!(findings(&pod(json!({"recursiveReadOnly": "Enabled", "readOnly": true}))), vec![]);
    assert_eq!(
        findings(&pod(json!({"recursiveReadOnly": "IfPossible", "readOnly": true}))),
        vec![]
    );
    assert_eq!(findings(&pod(json!({"subPathExpr": "$(POD_NAME)"}))), vec![]);
    assert_eq!(
        findings(&container_with("securityContext", json!({"procMount": "Unmasked"}))),
        refused("spec.containers[0].securityContext.procMount")
    );
}

#[test]
fn a1_init_containers_are_reviewed_with_their_index_and_may_be_sidecars() {
    let init = |restart_policy: Option<&str>, extra: Value| {
        let mut container = json!({"name": "init", "image": "busybox"});
        if let Some(policy) = restart_policy {
            container["restartPolicy"] = json!(policy);
        }
        for (key, value) in extra.as_object().into_iter().flatten() {
            container[key] = value.clone();
        }
        pod(
            json!({"initContainers": [{"name": "first", "image": "busybox"}, container]}),
            json!({}),
        )
    };
    assert_eq!(findings(&init(Some("Always"), json!({}))), vec![]);
    // Their own policy (I4).
    assert_eq!(findings(&init(Some("OnFailure"), json!({}))), vec![]);
    assert_eq!(
        findings(&init(Some("Sometimes"), json!({}))),
        refused("spec.initContainers[1].restartPolicy")
    );
    assert_eq!(
        findings(&init(
            None,
            json!({"resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}]})
        )),
        refused("spec.initContainers[1].resizePolicy")
    );
    // An app container's own policy is not a sidecar's: it overrides the pod's (I4).
    assert_eq!(findings(&container_with("restartPolicy", json!("Always"))), vec![]);
}

#[test]
fn v2_static_pods_may_not_refer_to_api_objects_and_api_pods_may() {
    let pod = pod(
        json!({
            "imagePullSecrets": [{"name": "registry"}],
            "volumes": [
                {"name": "c", "configMap": {"name": "c"}},
                {"name": "s", "secret": {"secretName": "s"}},
                {"name": "d", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
                {"name": "kube-api-access-x2k9p", "projected": {"sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
                ]}},
            ],
        }),
        json!({
            "env": [{"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
            "envFrom": [{"configMapRef": {"name": "c"}}],
        }),
    );
    let found = review(&pod, &NodeFacts::default(), Source::File);
    let fields: Vec<_> = found.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.containers[0].env[0].valueFrom.secretKeyRef",
            "spec.containers[0].envFrom",
            "spec.imagePullSecrets",
            "spec.volumes[0].configMap",
            "spec.volumes[1].secret",
            "spec.volumes[3].projected.sources[0].serviceAccountToken",
            "spec.volumes[3].projected.sources[1].configMap",
        ]
    );
    assert!(found.iter().all(|f| f.message.contains("static pods may not refer to API objects")));
    for source in [Source::File, Source::Url, Source::Push] {
        assert!(refuses(&review(&pod, &NodeFacts::default(), source)), "{source:?}");
    }
    assert_eq!(review(&pod, &NodeFacts::default(), Source::Api), vec![], "API pods may");
    // The downward API is the pod's own: static pods may project it.
    let downward = pod_with(
        "volumes",
        json!([{"name": "p", "projected": {"sources": [{"downwardAPI": {"items": [
            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}}]),
    );
    assert_eq!(review(&downward, &NodeFacts::default(), Source::File), vec![]);
}

#[test]
fn k3_claim_volumes_are_for_api_pods_only() {
    let claims = pod_with(
        "volumes",
        json!([
            {"name": "www", "persistentVolumeClaim": {"claimName": "www-web-0", "readOnly": true}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
            }}}},
        ]),
    );
    assert_eq!(review(&claims, &NodeFacts::default(), Source::Api), vec![], "API pods may");
    let found = review(&claims, &NodeFacts::default(), Source::File);
    let fields: Vec<_> = found.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(fields, ["spec.volumes[0].persistentVolumeClaim", "spec.volumes[1].ephemeral"]);
    assert!(found.iter().all(|f| f.message.contains("static pods may not refer to API objects")));
    assert!(refuses(&found));
}

/// kubernetes.io's raw block volume example: a pod with `volumeDevices` of a Block claim.
fn block_pod(devices: Value, mounts: Value) -> Pod {
    pod(
        json!({"volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "block-pvc"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
                "accessModes": ["ReadWriteOnce"], "volumeMode": "Block",
                "resources": {"requests": {"storage": "1Gi"}},
            }}}},
            {"name": "cache", "emptyDir": {}},
        ]}),
        json!({"volumeDevices": devices, "volumeMounts": mounts}),
    )
}

#[test]
fn k3_volume_devices_of_claims_are_for_api_pods_only() {
    let devices = json!([
        {"name": "data", "devicePath": "/dev/xvda"},
        {"name": "scratch", "devicePath": "/dev/xvdb"},
    ]);
    let pod = block_pod(devices, json!([{"name": "cache", "mountPath": "/cache"}]));
    assert_eq!(review(&pod, &NodeFacts::default(), Source::Api), vec![], "API pods may");
    let found = review(&pod, &NodeFacts::default(), Source::File);
    let fields: Vec<_> = found.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.containers[0].volumeDevices",
            "spec.volumes[0].persistentVolumeClaim",
            "spec.volumes[1].ephemeral",
        ]
    );
    assert!(found.iter().all(|f| f.message.contains("static pods may not refer to API objects")));
}

#[test]
fn k3_volume_devices_are_validated_as_the_api_server_does() {
    let messages = |devices: Value, mounts: Value| -> Vec<String> {
        let pod = block_pod(devices, mounts);
        let found = review(&pod, &NodeFacts::default(), Source::Api);
        assert!(found.iter().all(|f| f.severity == Severity::Refused), "{found:?}");
        found.into_iter().map(|f| f.message).collect()
    };
    let at = "spec.containers[0].volumeDevices";
    assert_eq!(
        messages(
            json!([
                {"name": "cache", "devicePath": "/dev/a"},
                {"name": "nowhere", "devicePath": "/dev/a"},
                {"name": "data", "devicePath": "dev/b"},
                {"name": "data", "devicePath": "/dev/../c"},
                {"name": "", "devicePath": ""},
            ]),
            json!([]),
        ),
        [
            format!(
                "{at}[0].name: Invalid value: \"cache\": can only use volume source type of \
                 PersistentVolumeClaim or Ephemeral for block mode"
            ),
            format!("{at}[1].name: Not found: \"nowhere\""),
            format!("{at}[1].devicePath: Invalid value: \"/dev/a\": must be unique"),
            format!(
                "{at}[2].devicePath: Invalid value: \"dev/b\": must be an absolute path \
                 (kubelet: error DevicePath `dev/b` must be an absolute path)"
            ),
            format!("{at}[3].name: Invalid value: \"data\": must be unique"),
            format!(
                "{at}[3].devicePath: Invalid value: \"/dev/../c\": can not contain backsteps \
                 ('..')"
            ),
            format!("{at}[4].name: Required value"),
            format!("{at}[4].name: Not found: \"\""),
            format!("{at}[4].devicePath: Required value"),
        ]
    );
    // A volume is mounted or a device in one container, not both; nor a path both.
    assert_eq!(
        messages(
            json!([{"name": "data", "devicePath": "/cache"}]),
            json!([{"name": "data", "mountPath": "/data"}, {"name": "cache", "mountPath": "/cache"}]),
        ),
        [
            format!(
                "{at}[0].name: Invalid value: \"data\": must not already exist in volumeMounts"
            ),
            format!(
                "{at}[0].devicePath: Invalid value: \"/cache\": must not already exist as a path \
                 in volumeMounts"
            ),
        ]
    );
    // An ephemeral container's are checked against its own mounts.
    let mut debug = block_pod(json!([]), json!([]));
    debug.spec.as_mut().unwrap().ephemeral_containers = Some(vec![
        serde_json::from_value(json!({
            "name": "debugger", "image": "busybox",
            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            "volumeDevices": [{"name": "data", "devicePath": "/dev/xvda"}],
        }))
        .unwrap(),
    ]);
    let found = review(&debug, &NodeFacts::default(), Source::Api);
    let fields: Vec<_> = found.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(fields, ["spec.ephemeralContainers[0].volumeDevices[0].name"]);
}

#[test]
fn v1_a_cluster_trust_bundle_is_an_api_object_and_pod_certificates_are_refused() {
    let pod = pod_with(
        "volumes",
        json!([{"name": "p", "projected": {"sources": [
            {"clusterTrustBundle": {"signerName": "example.com/x", "path": "b.pem"}},
            {"podCertificate": {"signerName": "example.com/x", "keyType": "ED25519"}},
        ]}}]),
    );
    let fields = |source| {
        let found = review(&pod, &NodeFacts::default(), source);
        assert!(refuses(&found));
        found.into_iter().map(|f| f.field).collect::<Vec<_>>()
    };
    assert_eq!(fields(Source::Api), ["spec.volumes[0].projected.sources[1].podCertificate"]);
    assert_eq!(
        fields(Source::File),
        [
            "spec.volumes[0].projected.sources[0].clusterTrustBundle",
            "spec.volumes[0].projected.sources[1].podCertificate",
        ]
    );
}

#[test]
fn v4_image_volumes_are_admitted_and_checked_as_the_api_server_checks_them() {
    let pod = pod_with(
        "volumes",
        json!([{"name": "model", "image": {"reference": "outpost.test/model:v1", "pullPolicy": "IfNotPresent"}}]),
    );
    for source in [Source::File, Source::Api] {
        assert!(review(&pod, &NodeFacts::default(), source).is_empty(), "{source:?}");
    }
    let pod = pod_with(
        "volumes",
        json!([{"name": "model", "image": {"reference": "", "pullPolicy": "Sometimes"}}]),
    );
    let found = review(&pod, &NodeFacts::default(), Source::File);
    let fields: Vec<_> = found.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(fields, ["spec.volumes[0].image", "spec.volumes[0].image.pullPolicy"]);
    assert!(found[0].message.contains("reference: Required value"), "{}", found[0].message);
    assert!(refuses(&found));
}

#[test]
fn fields_lists_each_path_once() {
    let mut paths: Vec<String> = fields().map(|(path, _)| path).collect();
    let count = paths.len();
    paths.sort();
    paths.dedup();
    assert_eq!(paths.len(), count);
}

#[test]
fn a1_permissive_facts_leave_only_what_no_node_allows() {
    let facts = NodeFacts::permissive();
    let pod =
        container_with("securityContext", json!({"appArmorProfile": {"type": "RuntimeDefault"}}));
    assert_eq!(apparmor(&facts, &pod), vec![]);
    for allowed in ["net.core.somaxconn", "kernel.msgmax", "kernel.sem", "fs.mqueue.msg_max"] {
        assert_eq!(apparmor(&facts, &sysctl_pod(allowed, false)), vec![], "{allowed}");
    }
    let field = "spec.securityContext.sysctls[1].name".to_owned();
    let forbidden = vec![(field, Severity::Refused, "SysctlForbidden")];
    assert_eq!(apparmor(&facts, &sysctl_pod("vm.swappiness", false)), forbidden);
    assert_eq!(apparmor(&facts, &sysctl_pod("net.core.somaxconn", true)), forbidden);
}

#[test]
fn a1_supplemental_groups_policy_strict_is_refused() {
    let strict = pod_with("securityContext", json!({"supplementalGroupsPolicy": "Strict"}));
    assert_eq!(findings(&strict), refused("spec.securityContext.supplementalGroupsPolicy"));
    let merge = pod_with("securityContext", json!({"supplementalGroupsPolicy": "Merge"}));
    assert_eq!(findings(&merge), vec![]);
}

#[test]
fn a1_stdin_is_admitted_and_a_process_namespace_shared_with_the_host_is_refused() {
    let refused = |spec: serde_json::Value| {
        let pod: Pod =
            serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap();
        review(&pod, &NodeFacts::permissive(), Source::File)
            .into_iter()
            .filter(|f| f.severity == Severity::Refused)
            .map(|f| f.field)
            .collect::<Vec<_>>()
    };
    // An attach holds it (N3): the shim keeps the container's stdin FIFO open.
    let stdin = |once: bool| json!({"containers": [{"name": "c", "image": "i", "stdin": true, "stdinOnce": once, "tty": true}]});
    assert!(refused(stdin(true)).is_empty());
    assert!(refused(stdin(false)).is_empty());
    let shared = |host_pid: bool| {
        json!({"shareProcessNamespace": true, "hostPID": host_pid,
               "containers": [{"name": "c", "image": "i"}]})
    };
    assert_eq!(refused(shared(true)), ["spec.shareProcessNamespace"]);
    assert!(refused(shared(false)).is_empty());
}

#[test]
fn names_are_normalized_as_kubelet_does() {
    assert_eq!(sysctl::normalize("net.ipv4.ip_local_port_range"), "net.ipv4.ip_local_port_range");
    assert_eq!(sysctl::normalize("net/ipv4/ip_local_port_range"), "net.ipv4.ip_local_port_range");
    assert_eq!(
        sysctl::normalize("net/ipv4/conf/eno2.100/rp_filter"),
        "net.ipv4.conf.eno2/100.rp_filter"
    );
    assert_eq!(
        sysctl::normalize("net.ipv4.conf.eno2/100.rp_filter"),
        "net.ipv4.conf.eno2/100.rp_filter"
    );
    assert_eq!(sysctl::normalize("kernel"), "kernel");
}

#[test]
fn namespaces_by_kubelets_prefixes() {
    for ipc in ["kernel.shmmax", "kernel.msgmax", "kernel.sem", "fs.mqueue.msg_max"] {
        assert_eq!(sysctl::namespace(ipc), Some(sysctl::Namespace::Ipc), "{ipc}");
    }
    assert_eq!(sysctl::namespace("net.ipv4.ip_forward"), Some(sysctl::Namespace::Network));
    assert_eq!(sysctl::namespace("kernel.hostname"), Some(sysctl::Namespace::Uts));
    assert_eq!(sysctl::namespace("kernel.domainname"), Some(sysctl::Namespace::Uts));
    assert_eq!(sysctl::namespace("vm.swappiness"), None);
    assert_eq!(sysctl::namespace("kernel.shm_rmid_forced"), Some(sysctl::Namespace::Ipc));
}

/// S12: what the API source found unknown in an API pod's securityContext is refused,
/// field by field; the annotation that carries it is Outpost's own, not a finding.
#[test]
fn s12_unknown_security_fields_of_an_api_pod_are_refused() {
    let mut refused_pod = pod(json!({}), json!({}));
    let fields = "spec.containers[0].securityContext.cgroupOptions,spec.securityContext.newThing";
    refused_pod
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(UNKNOWN_SECURITY_FIELDS.to_owned(), fields.to_owned());
    let found = review(&refused_pod, &NodeFacts::default(), Source::Api);
    let summary: Vec<_> = found.iter().map(|f| (f.field.as_str(), f.severity)).collect();
    assert_eq!(
        summary,
        [
            ("spec.containers[0].securityContext.cgroupOptions", Severity::Refused),
            ("spec.securityContext.newThing", Severity::Refused)
        ]
    );
    assert!(found[0].message.contains("unknown field in a securityContext"), "{found:?}");
}

#[test]
fn a1_selinux_options_are_passed_on_where_selinux_is_off_and_refused_where_it_is_on() {
    let off = NodeFacts::default();
    let on = NodeFacts { selinux_enabled: true, ..NodeFacts::default() };
    let options = json!({"seLinuxOptions": {"level": "s0:c123,c456", "type": "spc_t"}});
    let in_container = container_with("securityContext", options.clone());
    let in_pod = pod_with("securityContext", options);
    assert_eq!(apparmor(&off, &in_container), vec![]);
    assert_eq!(apparmor(&off, &in_pod), vec![]);
    assert_eq!(
        apparmor(&on, &in_container),
        refused("spec.containers[0].securityContext.seLinuxOptions")
    );
    assert_eq!(apparmor(&on, &in_pod), refused("spec.securityContext.seLinuxOptions"));
    let message = &review(&in_pod, &on, Source::File)[0].message;
    assert!(message.contains("SELinux enabled") && message.contains("process.selinuxLabel"));
    let empty = container_with("securityContext", json!({"seLinuxOptions": {}}));
    assert_eq!(apparmor(&on, &empty), vec![], "empty options ask for no label");
}

#[test]
fn x2_an_ephemeral_container_is_a_container_without_what_the_api_server_forbids() {
    let debugger = json!([{
        "name": "debugger",
        "image": "busybox",
        "stdin": true,
        "tty": true,
        "targetContainerName": "app",
        "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}},
    }]);
    assert_eq!(findings(&pod_with("ephemeralContainers", debugger)), []);
    let ported = json!([{"name": "debugger", "image": "busybox", "ports": [{"containerPort": 80}],
        "readinessProbe": {"exec": {"command": ["true"]}}}]);
    assert_eq!(
        findings_of(&pod_with("ephemeralContainers", ported)),
        ["spec.ephemeralContainers[0].ports", "spec.ephemeralContainers[0].readinessProbe"]
    );
}

fn findings_of(pod: &Pod) -> Vec<String> {
    findings(pod).into_iter().map(|(f, _, _)| f).collect()
}
