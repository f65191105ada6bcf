use k8s_openapi::api::core::v1::Pod;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::admission::{self, NodeFacts};

const SOURCES: [Source; 4] = [Source::File, Source::Url, Source::Push, Source::Api];

/// A pod from JSON: `spec` merged over a minimal pod with one container.
fn pod(spec: Value) -> Pod {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    });
    for (key, value) in spec.as_object().into_iter().flatten() {
        pod["spec"][key] = value.clone();
    }
    serde_json::from_value(pod).expect("a valid pod")
}

fn privileged_pod() -> Pod {
    pod(
        json!({"containers": [{"name": "app", "image": "busybox", "securityContext": {"privileged": true}}]}),
    )
}

fn host_path_pod(path: &str) -> Pod {
    pod(json!({"volumes": [{"name": "h", "hostPath": {"path": path}}]}))
}

/// The refused fields, in order.
fn fields(pod: &Pod, source: Source, policy: &Policy) -> Vec<String> {
    let findings = review(pod, source, policy);
    assert!(findings.iter().all(|f| f.severity == Severity::Refused && f.reason == FORBIDDEN));
    findings.into_iter().map(|f| f.field).collect()
}

fn with(source: Source, edit: impl FnOnce(&mut SourcePolicy)) -> Policy {
    let mut policy = Policy::default();
    edit(match source {
        Source::File => &mut policy.file,
        Source::Url => &mut policy.url,
        Source::Push => &mut policy.push,
        Source::Api => &mut policy.api,
    });
    policy
}

#[test]
fn a_pod_that_asks_for_nothing_of_the_host_passes_every_source() {
    let pod = pod(json!({
        "volumes": [{"name": "scratch", "emptyDir": {}}],
        "hostNetwork": false,
        "containers": [{"name": "app", "image": "busybox", "securityContext": {"privileged": false, "allowPrivilegeEscalation": true}}],
    }));
    for source in SOURCES {
        assert_eq!(fields(&pod, source, &Policy::default()), Vec::<String>::new(), "{source}");
    }
}

#[test]
fn defaults_file_and_api_pods_may_do_anything_url_and_push_pods_nothing() {
    let pod = pod(json!({
        "hostNetwork": true, "hostPID": true, "hostIPC": true,
        "volumes": [{"name": "h", "hostPath": {"path": "/var/log"}}],
        "containers": [{"name": "app", "image": "busybox", "securityContext": {"privileged": true}}],
    }));
    let everything = [
        "spec.hostNetwork",
        "spec.hostPID",
        "spec.hostIPC",
        "spec.containers[0].securityContext.privileged",
        "spec.volumes[0].hostPath.path",
    ];
    for (source, refused) in [
        (Source::File, &[][..]),
        (Source::Url, &everything[..]),
        (Source::Push, &everything[..]),
        (Source::Api, &[][..]),
    ] {
        assert_eq!(fields(&pod, source, &Policy::default()), refused, "{source}");
    }
}

#[test]
fn each_control_is_refused_alone_and_allowed_by_its_own_setting() {
    type Edit = fn(&mut SourcePolicy);
    let cases: [(Value, &str, Edit); 4] = [
        (json!({"hostNetwork": true}), "spec.hostNetwork", |p| p.host_network = true),
        (json!({"hostPID": true}), "spec.hostPID", |p| p.host_pid = true),
        (json!({"hostIPC": true}), "spec.hostIPC", |p| p.host_ipc = true),
        (
            json!({"containers": [{"name": "a", "image": "i", "securityContext": {"privileged": true}}]}),
            "spec.containers[0].securityContext.privileged",
            |p| p.privileged = true,
        ),
    ];
    for (spec, field, allow) in cases {
        let pod = pod(spec);
        for source in [Source::Url, Source::Push] {
            assert_eq!(fields(&pod, source, &Policy::default()), [field], "{source} {field}");
            assert_eq!(fields(&pod, source, &with(source, allow)), Vec::<String>::new());
            // Allowing it for the other http source does not allow it for this one.
            let other = if source == Source::Url { Source::Push } else { Source::Url };
            assert_eq!(fields(&pod, source, &with(other, allow)), [field], "{source} {field}");
        }
        // A restricted file or api source refuses it as well.
        for source in [Source::File, Source::Api] {
            let policy = with(source, |p| *p = SourcePolicy::restricted());
            assert_eq!(fields(&pod, source, &policy), [field], "{source} {field}");
        }
    }
}

#[test]
fn host_namespaces_set_false_are_not_asking() {
    let pod = pod(json!({"hostNetwork": false, "hostPID": false, "hostIPC": false}));
    assert_eq!(fields(&pod, Source::Push, &Policy::default()), Vec::<String>::new());
}

#[test]
fn privileged_init_and_ephemeral_containers_are_refused_with_their_index() {
    let privileged = json!({"privileged": true});
    let pod = pod(json!({
        "containers": [
            {"name": "a", "image": "i"},
            {"name": "b", "image": "i", "securityContext": privileged},
        ],
        "initContainers": [
            {"name": "c", "image": "i", "securityContext": privileged},
            {"name": "d", "image": "i", "securityContext": {"privileged": false}},
        ],
        "ephemeralContainers": [{"name": "e", "image": "i", "securityContext": privileged}],
    }));
    assert_eq!(
        fields(&pod, Source::Url, &Policy::default()),
        [
            "spec.containers[1].securityContext.privileged",
            "spec.initContainers[0].securityContext.privileged",
            "spec.ephemeralContainers[0].securityContext.privileged",
        ]
    );
    let allowed = with(Source::Url, |p| p.privileged = true);
    assert_eq!(fields(&pod, Source::Url, &allowed), Vec::<String>::new());
}

#[test]
fn allow_privilege_escalation_and_capabilities_are_not_privileged() {
    let pod = pod(json!({"containers": [{"name": "a", "image": "i", "securityContext": {
        "allowPrivilegeEscalation": true, "capabilities": {"add": ["NET_ADMIN"]}, "runAsUser": 0,
    }}]}));
    assert_eq!(fields(&pod, Source::Push, &Policy::default()), Vec::<String>::new());
}

#[test]
fn host_paths_are_allowed_under_a_prefix_by_whole_components() {
    let policy = with(Source::Push, |p| {
        p.allowed_host_paths = vec!["/var/log".to_owned(), "/etc/ssl/certs".to_owned()];
    });
    for (path, allowed) in [
        ("/var/log", true),
        ("/var/log/", true),
        ("/var/log/app", true),
        ("/var/log/app/../other", true),
        ("//var//log/./app", true),
        ("/etc/ssl/certs/ca.pem", true),
        ("/var/logs", false),
        ("/var/lo", false),
        ("/var", false),
        ("/var/log/..", false),
        ("/var/log/../../etc/shadow", false),
        ("/var/log/app/../../lib", false),
        ("/etc/ssl", false),
        ("/", false),
        ("var/log/app", false),
        ("", false),
    ] {
        let refused = fields(&host_path_pod(path), Source::Push, &policy);
        let expected: &[&str] = if allowed { &[] } else { &["spec.volumes[0].hostPath.path"] };
        assert_eq!(refused, expected, "{path:?}");
    }
}

#[test]
fn the_root_prefix_allows_every_host_path_even_a_relative_one() {
    let policy = with(Source::Url, |p| p.allowed_host_paths = vec!["/".to_owned()]);
    for path in ["/", "/etc", "/../..", "relative", ""] {
        assert_eq!(fields(&host_path_pod(path), Source::Url, &policy), Vec::<String>::new());
    }
}

#[test]
fn each_host_path_volume_is_checked_with_its_index() {
    let pod = pod(json!({"volumes": [
        {"name": "a", "hostPath": {"path": "/data/a"}},
        {"name": "b", "emptyDir": {}},
        {"name": "c", "hostPath": {"path": "/root"}},
    ]}));
    let policy = with(Source::Push, |p| p.allowed_host_paths = vec!["/data".to_owned()]);
    assert_eq!(fields(&pod, Source::Push, &policy), ["spec.volumes[2].hostPath.path"]);
}

#[test]
fn the_message_names_the_field_the_source_and_the_config_key() {
    let [finding] = review(&privileged_pod(), Source::Push, &Policy::default())
        .try_into()
        .expect("one finding");
    assert_eq!(
        finding.message,
        "spec.containers[0].securityContext.privileged: a privileged container is not allowed \
         for pods from the push endpoint (source push); allow it with \
         admissionPolicy.push.privileged: true in the agent's config file"
    );
    let [finding] = review(&host_path_pod("/srv/data/../app/"), Source::Url, &Policy::default())
        .try_into()
        .expect("one finding");
    assert_eq!(
        finding.message,
        "spec.volumes[0].hostPath.path: hostPath \"/srv/data/../app/\" is not allowed for pods \
         from the manifest URL (source url); allow it with admissionPolicy.url.allowedHostPaths: \
         [/srv/app] (or a directory above it) in the agent's config file"
    );
    let pod = pod(json!({"hostPID": true}));
    let policy = with(Source::File, |p| p.host_pid = false);
    let [finding] = review(&pod, Source::File, &policy).try_into().expect("one finding");
    assert!(
        finding.message.contains("the manifest directory (source file)"),
        "{}",
        finding.message
    );
    assert!(finding.message.contains("admissionPolicy.file.hostPID: true"), "{}", finding.message);
}

#[test]
fn admission_review_applies_the_nodes_policy_and_permissive_facts_allow_all() {
    let pod = privileged_pod();
    let refused = admission::review(&pod, &NodeFacts::default(), Source::Push);
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].reason, FORBIDDEN);
    assert!(admission::refuses(&refused));
    assert!(admission::review(&pod, &NodeFacts::default(), Source::File).is_empty());
    assert!(admission::review(&pod, &NodeFacts::permissive(), Source::Push).is_empty());
}

#[test]
fn config_keys_name_the_source() {
    let keys: Vec<String> = SOURCES.into_iter().map(config_key).collect();
    assert_eq!(
        keys,
        [
            "admissionPolicy.file",
            "admissionPolicy.url",
            "admissionPolicy.push",
            "admissionPolicy.api"
        ]
    );
}

#[test]
fn normalize_resolves_dots_and_slashes_and_refuses_relative_paths() {
    for (path, normalized) in [
        ("/", Some("/")),
        ("//", Some("/")),
        ("/..", Some("/")),
        ("/a/b/", Some("/a/b")),
        ("/a/./b", Some("/a/b")),
        ("/a/../b", Some("/b")),
        ("/a/b/../../..", Some("/")),
        ("/a//b", Some("/a/b")),
        ("/a/...", Some("/a/...")),
        ("a/b", None),
        ("./a", None),
        ("", None),
    ] {
        assert_eq!(normalize(path).as_deref(), normalized, "{path:?}");
    }
}

/// A path component: a name, or `.`/`..`, or empty (a repeated slash).
fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z]{1,3}",
        1 => Just(".".to_owned()),
        1 => Just("..".to_owned()),
        1 => Just(String::new()),
    ]
}

/// The components a path resolves to (the model `normalize` and `within` follow).
fn resolved(components: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in components {
        match c.as_str() {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            name => out.push(name.to_owned()),
        }
    }
    out
}

fn path_of(components: &[String]) -> String {
    format!("/{}", components.join("/"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// `within` holds exactly when the prefix's resolved components start the path's.
    #[test]
    fn within_is_a_prefix_of_whole_resolved_components(
        path in prop::collection::vec(component(), 0..8),
        prefix in prop::collection::vec(component(), 0..5),
        trailing in any::<bool>(),
    ) {
        let written = if trailing { format!("{}/", path_of(&path)) } else { path_of(&path) };
        let path_n = normalize(&written).expect("absolute");
        let prefix_n = normalize(&path_of(&prefix)).expect("absolute");
        let (p, q) = (resolved(&path), resolved(&prefix));
        prop_assert_eq!(within(&path_n, &prefix_n), p.starts_with(&q));
        let policy = SourcePolicy { allowed_host_paths: vec![prefix_n.clone()], ..SourcePolicy::restricted() };
        prop_assert_eq!(policy.allows_host_path(&written), p.starts_with(&q));
    }

    /// A path is always under its own parents, and never under a sibling that only
    /// extends its last component (`/var/log` does not allow `/var/logs`).
    #[test]
    fn parents_allow_and_longer_siblings_do_not(
        names in prop::collection::vec("[a-z]{1,4}", 1..6),
        cut in 0usize..6,
        extra in "[a-z0-9]{1,3}",
    ) {
        let path = path_of(&names);
        let parent = path_of(&names[..cut.min(names.len())]);
        prop_assert!(within(&path, &parent));
        let mut sibling = names.clone();
        if let Some(last) = sibling.last_mut() {
            last.push_str(&extra);
        }
        prop_assert!(!within(&path_of(&sibling), &path));
    }

    /// Normalising is idempotent and gives an absolute path with no `.`, `..`, empty or
    /// trailing component.
    #[test]
    fn normalize_is_idempotent_and_clean(path in prop::collection::vec(component(), 0..8)) {
        let once = normalize(&path_of(&path)).expect("absolute");
        let twice = normalize(&once);
        prop_assert_eq!(twice.as_deref(), Some(once.as_str()));
        prop_assert!(once.starts_with('/'));
        prop_assert!(once == "/" || !once.ends_with('/'));
        prop_assert!(once.split('/').skip(1).all(|c| once == "/" || !matches!(c, "" | "." | "..")));
        prop_assert_eq!(once, path_of(&resolved(&path)));
    }
}
