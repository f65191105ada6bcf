use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use proptest::prelude::*;

use super::content::{Owner, is_current, mirror_pod};
use super::*;
use crate::pod::{CONFIG_HASH, CONFIG_MIRROR, CONFIG_SEEN, CONFIG_SOURCE, annotation};

fn name(n: &str) -> FullName {
    FullName { namespace: "default".into(), name: n.into() }
}

fn running(hash: &str) -> StaticPod {
    StaticPod { hash: hash.into(), running: true }
}

fn mirror(uid: &str, of: &str) -> Observed {
    Observed { uid: uid.into(), mirror_of: of.into(), deleting: false, current: true }
}

fn world(statics: &[(&str, StaticPod)], mirrors: &[(&str, Observed)]) -> World {
    World {
        statics: statics.iter().map(|(n, s)| (name(n), s.clone())).collect(),
        mirrors: mirrors.iter().map(|(n, m)| (name(n), m.clone())).collect(),
        synced: true,
        ..World::default()
    }
}

#[test]
fn r1_a_running_static_pod_without_mirror_gets_one() {
    let w = world(&[("web", running("h1"))], &[]);
    assert_eq!(plan(&w), [Action::Create { name: name("web") }]);
}

#[test]
fn r1_an_up_to_date_mirror_is_left_alone() {
    let w = world(&[("web", running("h1"))], &[("web", mirror("u1", "h1"))]);
    assert_eq!(plan(&w), []);
}

#[test]
fn r2_and_r5_outdated_deleting_or_edited_mirrors_are_replaced() {
    let cases = [
        (mirror("u1", "old"), Reason::Outdated),
        (Observed { deleting: true, ..mirror("u1", "h1") }, Reason::Deleting),
        (Observed { current: false, ..mirror("u1", "h1") }, Reason::Edited),
    ];
    for (observed, reason) in cases {
        let w = world(&[("web", running("h1"))], &[("web", observed)]);
        assert_eq!(plan(&w), [Action::Replace { name: name("web"), uid: "u1".into(), reason }]);
    }
}

#[test]
fn r3_orphans_are_deleted_once_every_source_is_seen() {
    let mut w = world(&[], &[("gone", mirror("u1", "h1"))]);
    assert_eq!(plan(&w), [Action::Delete { name: name("gone"), uid: "u1".into() }]);
    w.synced = false;
    assert_eq!(plan(&w), [], "M9: not before every source is seen");
}

#[test]
fn r3_the_mirror_of_a_terminating_static_pod_stays_until_it_stops() {
    let mut w = world(&[], &[("web", mirror("u1", "h1"))]);
    w.terminating.insert("h1".into());
    assert_eq!(plan(&w), []);
    w.terminating.insert("h2".into());
    w.terminating.remove("h1");
    assert_eq!(plan(&w), [Action::Delete { name: name("web"), uid: "u1".into() }]);
}

#[test]
fn a_static_pod_not_yet_running_keeps_its_mirror_as_it_is() {
    let pending = StaticPod { hash: "h2".into(), running: false };
    let w = world(&[("web", pending.clone())], &[("web", mirror("u1", "h1"))]);
    assert_eq!(plan(&w), [], "M10: replaced once the new pod runs");
    let w = world(&[("web", pending)], &[]);
    assert_eq!(plan(&w), []);
}

#[test]
fn a_name_held_by_a_pod_that_is_no_mirror_is_reported_not_fought() {
    let mut w = world(&[("web", running("h1"))], &[]);
    w.blocked.insert(name("web"));
    assert_eq!(plan(&w), [Action::Blocked { name: name("web") }]);
}

fn static_pod() -> Pod {
    let mut pod = Pod {
        metadata: ObjectMeta {
            name: Some("web-edge-1".into()),
            namespace: Some("default".into()),
            uid: Some("h1".into()),
            labels: Some([("app".to_owned(), "web".to_owned())].into()),
            annotations: Some(
                [
                    (CONFIG_HASH, "h1"),
                    (CONFIG_SOURCE, "file"),
                    (CONFIG_SEEN, "2026-01-01T00:00:00Z"),
                    ("example.com/team", "ops"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                image: Some("busybox".into()),
                ..Container::default()
            }],
            node_name: Some("edge-1".into()),
            ..PodSpec::default()
        }),
        status: Some(PodStatus { phase: Some("Pending".into()), ..PodStatus::default() }),
    };
    pod.metadata.creation_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    pod.metadata.resource_version = Some("7".into());
    pod
}

const NODE: Owner<'static> = Owner { name: "edge-1", uid: "node-uid" };

#[test]
fn r1_the_mirror_is_a_copy_with_config_mirror_and_the_node_as_controller() {
    let pod = static_pod();
    let m = mirror_pod(&pod, &NODE);
    assert_eq!(annotation(&m, CONFIG_MIRROR), Some("h1"));
    for key in [CONFIG_HASH, CONFIG_SOURCE, CONFIG_SEEN, "example.com/team"] {
        assert_eq!(annotation(&m, key), annotation(&pod, key), "{key}");
    }
    assert_eq!(m.metadata.labels, pod.metadata.labels);
    assert_eq!(
        (&m.metadata.name, &m.metadata.namespace),
        (&pod.metadata.name, &pod.metadata.namespace)
    );
    assert_eq!(m.spec, pod.spec);
    let owners = m.metadata.owner_references.as_deref().unwrap_or_default();
    assert_eq!(owners.len(), 1);
    let owner = &owners[0];
    assert_eq!(
        (owner.api_version.as_str(), owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("v1", "Node", "edge-1", "node-uid")
    );
    assert_eq!(owner.controller, Some(true));
    assert_eq!(m.metadata.uid, None);
    assert_eq!(m.metadata.resource_version, None);
    assert_eq!(m.metadata.creation_timestamp, None);
    assert_eq!(m.status, None);
}

/// The mirror as a real API server stores it: system fields, defaults, an extra
/// annotation from an admission plugin, a default toleration.
fn as_stored(mut m: Pod) -> Pod {
    m.metadata.uid = Some("server-uid".into());
    m.metadata.resource_version = Some("42".into());
    m.metadata.creation_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    m.metadata
        .annotations
        .get_or_insert_default()
        .insert("admission.example/seen".into(), "x".into());
    let spec = m.spec.get_or_insert_default();
    spec.dns_policy = Some("ClusterFirst".into());
    spec.scheduler_name = Some("default-scheduler".into());
    spec.tolerations.get_or_insert_default().push(Toleration {
        key: Some("node.kubernetes.io/not-ready".into()),
        operator: Some("Exists".into()),
        effect: Some("NoExecute".into()),
        toleration_seconds: Some(300),
        ..Toleration::default()
    });
    spec.containers[0].termination_message_path = Some("/dev/termination-log".into());
    spec.containers[0].image_pull_policy = Some("Always".into());
    m.status = Some(PodStatus { phase: Some("Running".into()), ..PodStatus::default() });
    m
}

#[test]
fn r5_server_side_additions_are_not_edits() {
    let desired = mirror_pod(&static_pod(), &NODE);
    assert!(is_current(&desired, &desired));
    assert!(is_current(&desired, &as_stored(desired.clone())));
}

#[test]
fn r4_a_restart_stamping_a_new_config_seen_is_not_an_edit() {
    let stored = as_stored(mirror_pod(&static_pod(), &NODE));
    let mut restarted = static_pod();
    let annotations = restarted.metadata.annotations.get_or_insert_default();
    annotations.insert(CONFIG_SEEN.into(), "2026-02-02T00:00:00Z".into());
    assert!(is_current(&mirror_pod(&restarted, &NODE), &stored));
}

#[test]
fn r5_edits_through_the_api_are_detected() {
    let desired = mirror_pod(&static_pod(), &NODE);
    let stored = as_stored(desired.clone());
    type Edit = Box<dyn Fn(&mut Pod)>;
    let edits: Vec<(&str, Edit)> = vec![
        (
            "label changed",
            Box::new(|p| {
                p.metadata.labels.get_or_insert_default().insert("app".into(), "other".into());
            }),
        ),
        (
            "label added",
            Box::new(|p| {
                p.metadata.labels.get_or_insert_default().insert("extra".into(), "x".into());
            }),
        ),
        ("labels removed", Box::new(|p| p.metadata.labels = None)),
        (
            "annotation changed",
            Box::new(|p| {
                p.metadata
                    .annotations
                    .get_or_insert_default()
                    .insert("example.com/team".into(), "dev".into());
            }),
        ),
        (
            "config.mirror removed",
            Box::new(|p| {
                p.metadata.annotations.get_or_insert_default().remove(CONFIG_MIRROR);
            }),
        ),
        ("owner removed", Box::new(|p| p.metadata.owner_references = None)),
        (
            "owner not controller",
            Box::new(|p| {
                p.metadata.owner_references.get_or_insert_default()[0].controller = Some(false);
            }),
        ),
        (
            "image changed",
            Box::new(|p| {
                p.spec.get_or_insert_default().containers[0].image = Some("nginx".into());
            }),
        ),
        (
            "deadline set",
            Box::new(|p| {
                p.spec.get_or_insert_default().active_deadline_seconds = Some(5);
            }),
        ),
    ];
    for (what, edit) in edits {
        let mut edited = stored.clone();
        edit(&mut edited);
        assert!(!is_current(&desired, &edited), "{what}");
    }
}

/// Applies what the sync task does for each action, as the API server would.
fn apply(world: &mut World, actions: &[Action], next_uid: &mut u32) {
    for action in actions {
        let mut create = |world: &mut World, name: &FullName| {
            *next_uid += 1;
            let hash = world.statics[name].hash.clone();
            world.mirrors.insert(name.clone(), mirror(&format!("new{next_uid}"), &hash));
        };
        match action {
            Action::Create { name } | Action::Replace { name, .. } => create(world, name),
            Action::Delete { name, .. } => {
                world.mirrors.remove(name);
            }
            Action::Blocked { .. } => {}
        }
    }
}

fn arb_world() -> impl Strategy<Value = World> {
    let names = prop::sample::select(vec!["a", "b", "c", "d", "e"]);
    let hashes = prop::sample::select(vec!["h1", "h2", "h3"]);
    let statics = prop::collection::btree_map(
        names.clone().prop_map(name),
        (hashes.clone(), any::<bool>())
            .prop_map(|(h, running)| StaticPod { hash: h.into(), running }),
        0..5,
    );
    let mirrors = prop::collection::btree_map(
        names.clone().prop_map(name),
        (hashes.clone(), any::<bool>(), any::<bool>(), 0u32..100).prop_map(
            |(h, deleting, current, uid)| Observed {
                uid: format!("u{uid}"),
                mirror_of: h.into(),
                deleting,
                current,
            },
        ),
        0..5,
    );
    let terminating = prop::collection::btree_set(hashes.prop_map(str::to_owned), 0..2);
    let blocked = prop::collection::btree_set(names.prop_map(name), 0..2);
    (statics, mirrors, terminating, blocked).prop_map(|(statics, mirrors, terminating, blocked)| {
        World { statics, mirrors, terminating, blocked, synced: true }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Applying a plan converges in one step: every running static pod whose name is
    /// free has exactly one up-to-date mirror, every other mirror is one a static pod
    /// still stands behind (not yet running, or terminating), and planning again does
    /// nothing but report the blocked names.
    #[test]
    fn applying_the_plan_converges(mut w in arb_world()) {
        let before = w.clone();
        let mut uid = 0;
        let actions = plan(&w);
        apply(&mut w, &actions, &mut uid);
        for (n, s) in &w.statics {
            let m = w.mirrors.get(n);
            let free = !before.blocked.contains(n) || before.mirrors.contains_key(n);
            if s.running && free {
                let m = m.expect("a running static pod has a mirror");
                prop_assert_eq!(&m.mirror_of, &s.hash);
                prop_assert!(!m.deleting && m.current);
            }
        }
        for (n, m) in &w.mirrors {
            let behind = w.statics.contains_key(n) || w.terminating.contains(&m.mirror_of);
            prop_assert!(behind, "mirror {} has nothing behind it", n);
        }
        let again = plan(&w);
        prop_assert!(again.iter().all(|a| matches!(a, Action::Blocked { .. })), "{:?}", again);
        // Only mirrors that must change are touched; a kept mirror keeps its UID.
        for (n, m) in &before.mirrors {
            if !actions.iter().any(|a| a.name() == n) {
                prop_assert_eq!(w.mirrors.get(n), Some(m));
            }
        }
    }

    /// Nothing is deleted before every source has been seen (M9), except mirrors being
    /// replaced for a running static pod.
    #[test]
    fn nothing_is_deleted_for_good_before_sync(mut w in arb_world()) {
        w.synced = false;
        let deletes = plan(&w).into_iter().filter(|a| matches!(a, Action::Delete { .. })).count();
        prop_assert_eq!(deletes, 0);
    }
}

#[test]
fn blocked_names_with_a_mirror_are_handled_as_mirrors() {
    let mut w = world(&[("web", running("h1"))], &[("web", mirror("u1", "h0"))]);
    w.blocked.insert(name("web"));
    let reason = Reason::Outdated;
    assert_eq!(plan(&w), [Action::Replace { name: name("web"), uid: "u1".into(), reason }]);
}
