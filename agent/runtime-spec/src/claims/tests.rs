use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, PersistentVolume, PersistentVolumeClaim, Pod, Volume};
use serde_json::{Value, json};

use super::*;
use crate::projection::{Object, Reference, Resolution, Resolved};

fn pod(volumes: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web-0", "namespace": "default", "uid": "pod-uid"},
        "spec": {"containers": [], "volumes": volumes},
    }))
    .unwrap()
}

fn claim_object(phase: &str, volume_name: &str) -> Value {
    json!({
        "metadata": {"name": "www-web-0", "namespace": "default", "uid": "claim-uid"},
        "spec": {"volumeName": volume_name},
        "status": {"phase": phase},
    })
}

fn volume_object(source: Value) -> Value {
    let mut pv = json!({
        "metadata": {"name": "pvc-1"},
        "spec": {"claimRef": {"name": "www-web-0", "namespace": "default", "uid": "claim-uid"}},
    });
    for (k, v) in source.as_object().unwrap() {
        pv["spec"][k] = v.clone();
    }
    pv
}

fn resolved(claim: Option<Value>, volume: Option<Value>) -> Resolved {
    let mut map = BTreeMap::new();
    let claim = match claim {
        Some(c) => Resolution::Found(Object::PersistentVolumeClaim(Arc::new(
            serde_json::from_value::<PersistentVolumeClaim>(c).unwrap(),
        ))),
        None => Resolution::Absent,
    };
    map.insert(Reference::PersistentVolumeClaim("www-web-0".into()), claim);
    let volume = match volume {
        Some(v) => Resolution::Found(Object::PersistentVolume(Arc::new(
            serde_json::from_value::<PersistentVolume>(v).unwrap(),
        ))),
        None => Resolution::Absent,
    };
    map.insert(Reference::PersistentVolume("pvc-1".into()), volume);
    Resolved(map)
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([("kubernetes.io/hostname".to_owned(), "edge-1".to_owned())])
}

fn www(read_only: bool) -> Pod {
    pod(
        json!([{"name": "www", "persistentVolumeClaim": {"claimName": "www-web-0", "readOnly": read_only}}]),
    )
}

/// The pod's first volume bound, as a container mounts it.
fn bind_www(pod: &Pod, resolved: &Resolved) -> Result<Option<Bound>, Error> {
    bind_used(pod, resolved, false)
}

/// The pod's first volume bound, as a container mounts it or (`device`) takes it as a
/// device.
fn bind_used(pod: &Pod, resolved: &Resolved, device: bool) -> Result<Option<Bound>, Error> {
    let labels = labels();
    let volume: &Volume = &pod.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0];
    let used = BTreeSet::from([volume.name.clone()]);
    let usage = if device {
        Usage { devices: used, ..Usage::default() }
    } else {
        Usage { mounts: used, ..Usage::default() }
    };
    bind(pod, volume, &usage, resolved, Node { name: "edge-1", labels: &labels })
}

fn host_path() -> Value {
    json!({"hostPath": {"path": "/opt/local-path-provisioner/pvc-1_default_www-web-0", "type": "DirectoryOrCreate"}})
}

fn processing(why: &str) -> Error {
    Error::Processing(format!("error processing PVC default/www-web-0: {why}"))
}

#[test]
fn k3_a_claim_volume_and_an_ephemeral_one_name_their_claims() {
    let p = pod(json!([
        {"name": "www", "persistentVolumeClaim": {"claimName": "data", "readOnly": true}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
        {"name": "tmp", "emptyDir": {}},
    ]));
    let volumes = p.spec.as_ref().unwrap().volumes.clone().unwrap();
    let claim_of = |v: &Volume| claim(&p, v);
    assert_eq!(
        claim_of(&volumes[0]),
        Some(ClaimVolume { name: "data".into(), ephemeral: false, read_only: true })
    );
    assert_eq!(
        claim_of(&volumes[1]),
        Some(ClaimVolume { name: "web-0-scratch".into(), ephemeral: true, read_only: false })
    );
    assert_eq!(claim_of(&volumes[2]), None);
    let references = crate::projection::volume_references(&p);
    assert!(references.contains(&Reference::PersistentVolumeClaim("data".into())));
    assert!(references.contains(&Reference::PersistentVolumeClaim("web-0-scratch".into())));
}

#[test]
fn k3_a_claim_names_its_volume_once_bound() {
    let claim: PersistentVolumeClaim = serde_json::from_value(claim_object("Pending", "")).unwrap();
    assert_eq!(bound_volume(&claim), None);
    let claim: PersistentVolumeClaim =
        serde_json::from_value(claim_object("Bound", "pvc-1")).unwrap();
    assert_eq!(bound_volume(&claim), Some("pvc-1"));
}

#[test]
fn k3_a_bound_host_path_volume_is_its_path_without_fs_group() {
    let r = resolved(Some(claim_object("Bound", "pvc-1")), Some(volume_object(host_path())));
    let bound = bind_www(&www(false), &r).unwrap().unwrap();
    assert_eq!(bound.volume, "pvc-1");
    assert!(!bound.read_only);
    assert!(!bound.takes_fs_group());
    let path = bound.path(Path::new("/state/pods/u"));
    assert_eq!(path, Path::new("/opt/local-path-provisioner/pvc-1_default_www-web-0"));
    let Source::HostPath(source) = bound.source else { panic!("hostPath") };
    assert_eq!(source.type_.as_deref(), Some("DirectoryOrCreate"));
}

#[test]
fn k3_a_local_volume_is_bind_mounted_in_the_pod_dir_and_takes_fs_group_unless_read_only() {
    let local = volume_object(json!({"local": {"path": "/mnt/disks/a"}}));
    let r = resolved(Some(claim_object("Bound", "pvc-1")), Some(local));
    let bound = bind_www(&www(false), &r).unwrap().unwrap();
    assert_eq!(bound.source, Source::Local { path: "/mnt/disks/a".into() });
    assert_eq!(
        bound.path(Path::new("/state/pods/u")),
        Path::new("/state/pods/u/volumes/kubernetes.io~local-volume/pvc-1")
    );
    assert!(bound.takes_fs_group());
    let read_only = bind_www(&www(true), &r).unwrap().unwrap();
    assert!(read_only.read_only);
    assert!(!read_only.takes_fs_group());
}

#[test]
fn k3_a_volume_that_is_not_a_claim_is_none() {
    let p = pod(json!([{"name": "www", "emptyDir": {}}]));
    assert_eq!(bind_www(&p, &Resolved::default()), Ok(None));
}

#[test]
fn k3_a_missing_or_unbound_claim_waits_with_kubelets_messages() {
    let p = www(false);
    let missing = resolved(None, None);
    assert_eq!(
        bind_www(&p, &missing),
        Err(processing(
            "failed to fetch PVC from API server: persistentvolumeclaims \"www-web-0\" not found"
        ))
    );
    assert_eq!(
        bind_www(&p, &Resolved::default()),
        Err(processing("failed to fetch PVC from API server: not fetched yet"))
    );
    let pending = resolved(Some(claim_object("Pending", "")), None);
    assert_eq!(bind_www(&p, &pending), Err(processing("PVC is not bound")));
    let lost = resolved(Some(claim_object("Lost", "pvc-1")), None);
    assert_eq!(bind_www(&p, &lost), Err(processing("PVC is not bound")));
    let empty = resolved(Some(claim_object("Bound", "")), None);
    assert_eq!(bind_www(&p, &empty), Err(processing("PVC has empty pvc.Spec.VolumeName")));
    let mut deleting = claim_object("Bound", "pvc-1");
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let deleting = resolved(Some(deleting), None);
    assert_eq!(bind_www(&p, &deleting), Err(processing("PVC is being deleted")));
}

#[test]
fn k3_a_missing_or_foreign_volume_waits_with_kubelets_messages() {
    let p = www(false);
    let no_volume = resolved(Some(claim_object("Bound", "pvc-1")), None);
    assert_eq!(
        bind_www(&p, &no_volume),
        Err(processing(
            "failed to fetch PV pvc-1 from API server: persistentvolumes \"pvc-1\" not found"
        ))
    );
    let mut unbound = volume_object(host_path());
    unbound["spec"].as_object_mut().unwrap().remove("claimRef");
    let r = resolved(Some(claim_object("Bound", "pvc-1")), Some(unbound));
    assert_eq!(
        bind_www(&p, &r),
        Err(processing(
            "found PV object pvc-1 but it has a nil pv.Spec.ClaimRef indicating it is not yet \
             bound to the claim"
        ))
    );
    let mut other = volume_object(host_path());
    other["spec"]["claimRef"]["uid"] = json!("other-uid");
    let r = resolved(Some(claim_object("Bound", "pvc-1")), Some(other));
    assert_eq!(
        bind_www(&p, &r),
        Err(processing(
            "found PV object pvc-1 but its pv.Spec.ClaimRef.UID other-uid does not point to \
             claim.UID claim-uid"
        ))
    );
}

/// kubelet's populator: a Block volume may not be mounted, a Filesystem one (the
/// default) may not be a device; its words, not prefixed as the claim's errors are.
#[test]
fn k3_a_volume_used_against_its_mode_is_refused_in_kubelets_words() {
    let p = www(false);
    let local = |mode: Option<&str>| {
        let mut pv = volume_object(json!({"local": {"path": "/dev/sdb"}}));
        if let Some(mode) = mode {
            pv["spec"]["volumeMode"] = json!(mode);
        }
        resolved(Some(claim_object("Bound", "pvc-1")), Some(pv))
    };
    assert_eq!(
        bind_used(&p, &local(Some("Block")), false),
        Err(Error::Processing(
            "volume www has volumeMode Block, but is specified in volumeMounts".into()
        ))
    );
    for mode in [Some("Filesystem"), None] {
        assert_eq!(
            bind_used(&p, &local(mode), true),
            Err(Error::Processing(
                "volume www has volumeMode Filesystem, but is specified in volumeDevices".into()
            ))
        );
    }
}

#[test]
fn k3_a_local_block_volume_is_its_device_linked_in_the_pod_dir_without_fs_group() {
    let mut pv = volume_object(json!({"local": {"path": "/dev/loop3"}}));
    pv["spec"]["volumeMode"] = json!("Block");
    let r = resolved(Some(claim_object("Bound", "pvc-1")), Some(pv));
    let bound = bind_used(&www(false), &r, true).unwrap().unwrap();
    assert_eq!(bound.source, Source::Local { path: "/dev/loop3".into() });
    assert!(bound.block);
    assert_eq!(
        bound.path(Path::new("/state/pods/u")),
        Path::new("/state/pods/u/volumeDevices/kubernetes.io~local-volume/pvc-1")
    );
    assert!(!bound.takes_fs_group());
}

#[test]
fn k3_a_host_path_volume_in_block_mode_is_refused_naming_it() {
    let mut pv = volume_object(host_path());
    pv["spec"]["volumeMode"] = json!("Block");
    let r = resolved(Some(claim_object("Bound", "pvc-1")), Some(pv));
    let error = bind_used(&www(false), &r, true).unwrap_err();
    assert_eq!(error, Error::BlockHostPath { volume: "pvc-1".into() });
    assert!(
        error.to_string().starts_with(
            "MapVolume.FindMapperPluginBySpec failed for volume \"pvc-1\" : no volume plugin \
             matched"
        ),
        "{error}"
    );
}

#[test]
fn k3_usage_is_every_containers_mounts_and_devices() {
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web-0", "namespace": "default"},
        "spec": {
            "containers": [{"name": "a", "volumeMounts": [{"name": "www", "mountPath": "/w"}],
                            "volumeDevices": [{"name": "raw", "devicePath": "/dev/xvda"}]}],
            "initContainers": [{"name": "i", "volumeDevices": [{"name": "raw2", "devicePath": "/dev/b"}]}],
            "ephemeralContainers": [{"name": "e", "volumeMounts": [{"name": "logs", "mountPath": "/l"}]}],
        },
    }))
    .unwrap();
    let usage = Usage::of(&p);
    let set = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<BTreeSet<_>>();
    assert_eq!(usage.mounts, set(&["logs", "www"]));
    assert_eq!(usage.devices, set(&["raw", "raw2"]));
    assert!(usage.uses("raw") && usage.uses("www") && !usage.uses("other"));
    assert_eq!(usage.expected(), ["logs", "raw", "raw2", "www"]);
}

/// kubelet's `makeBlockVolumes` with containerd's `WithDevices`: the host's node at the
/// entry's `devicePath`, `mrw`, or `r` for a read-only claim.
#[test]
fn k3_volume_devices_are_the_hosts_nodes_at_their_device_paths() {
    use oci_spec::runtime::{LinuxDeviceBuilder, LinuxDeviceType};
    let host = LinuxDeviceBuilder::default()
        .path("/dev/loop3")
        .typ(LinuxDeviceType::B)
        .major(7)
        .minor(3)
        .file_mode(0o660u32)
        .uid(0u32)
        .gid(6u32)
        .build()
        .unwrap();
    let container: Container = serde_json::from_value(json!({
        "name": "main",
        "volumeDevices": [{"name": "data", "devicePath": "/dev/xvda"}],
    }))
    .unwrap();
    for (read_only, access) in [(false, "mrw"), (true, "r")] {
        let claimed = BTreeMap::from([(
            "data".to_owned(),
            Claimed { path: "/p".into(), read_only, device: Some(host.clone()) },
        )]);
        let nodes = devices(&claimed, &container).unwrap();
        let mut expected = host.clone();
        expected.set_path("/dev/xvda".into());
        assert_eq!(nodes, [(expected, access.to_owned())]);
    }
    let filesystem = BTreeMap::from([(
        "data".to_owned(),
        Claimed { path: "/p".into(), read_only: false, device: None },
    )]);
    let missing = DeviceError::NoVolume { volume: "data".into(), container: "main".into() };
    assert_eq!(devices(&filesystem, &container), Err(missing.clone()));
    assert_eq!(devices(&BTreeMap::new(), &container), Err(missing.clone()));
    assert_eq!(missing.to_string(), "cannot find volume \"data\" to pass into container \"main\"");
    let mut relative = container.clone();
    relative.volume_devices.as_mut().unwrap()[0].device_path = "xvda".into();
    let error = devices(&BTreeMap::new(), &relative).unwrap_err();
    assert_eq!(error.to_string(), "error DevicePath `xvda` must be an absolute path");
}

#[test]
fn k3_network_or_csi_sources_are_refused_naming_the_type() {
    let p = www(false);
    for (source, kind) in [
        (json!({"nfs": {"server": "nas", "path": "/x"}}), "nfs"),
        (json!({"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "v"}}), "csi"),
        (json!({"iscsi": {"targetPortal": "t", "iqn": "i", "lun": 0}}), "iscsi"),
        (json!({"rbd": {"monitors": ["m"], "image": "i"}}), "rbd"),
        (json!({"cephfs": {"monitors": ["m"]}}), "cephfs"),
    ] {
        let r = resolved(Some(claim_object("Bound", "pvc-1")), Some(volume_object(source)));
        let error = bind_www(&p, &r).unwrap_err();
        assert_eq!(error, Error::Unsupported { volume: "pvc-1".into(), kind: kind.into() });
        assert!(error.to_string().contains(&format!("is of type {kind}")), "{error}");
    }
}

#[test]
fn k3_a_volume_whose_affinity_excludes_the_node_is_refused_with_kubelets_message() {
    let mut pinned = volume_object(host_path());
    pinned["spec"]["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["edge-2"]}]},
    ]}});
    let r = resolved(Some(claim_object("Bound", "pvc-1")), Some(pinned.clone()));
    let error = bind_www(&www(false), &r).unwrap_err();
    assert_eq!(
        error.to_string(),
        "MountVolume.NodeAffinity check failed for volume \"pvc-1\" : no matching NodeSelectorTerms"
    );
    pinned["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] =
        json!(["edge-1"]);
    let r = resolved(Some(claim_object("Bound", "pvc-1")), Some(pinned));
    assert!(bind_www(&www(false), &r).unwrap().is_some());
}

#[test]
fn k3_an_ephemeral_volumes_claim_must_be_the_pods_own() {
    let p = pod(json!([{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]));
    let make = |owner: Value| {
        let mut claim = claim_object("Bound", "pvc-1");
        claim["metadata"]["name"] = json!("web-0-scratch");
        claim["metadata"]["ownerReferences"] = owner;
        let mut map = resolved(Some(claim), Some(volume_object(host_path()))).0;
        let found = map.remove(&Reference::PersistentVolumeClaim("www-web-0".into())).unwrap();
        map.insert(Reference::PersistentVolumeClaim("web-0-scratch".into()), found);
        Resolved(map)
    };
    let owner = |uid: &str, controller: bool| json!([{"apiVersion": "v1", "kind": "Pod", "name": "web-0", "uid": uid, "controller": controller}]);
    assert!(bind_www(&p, &make(owner("pod-uid", true))).unwrap().is_some());
    let refused = Error::Processing(
        "PVC default/web-0-scratch was not created for pod default/web-0 (pod is not owner)".into(),
    );
    assert_eq!(bind_www(&p, &make(owner("other", true))), Err(refused.clone()));
    assert_eq!(bind_www(&p, &make(owner("pod-uid", false))), Err(refused.clone()));
    assert_eq!(bind_www(&p, &make(json!([]))), Err(refused));
}

#[test]
fn k3_failed_mount_reads_as_kubelets() {
    let expected = vec!["www".to_owned(), "kube-api-access-x".to_owned()];
    let failed = vec![(
        "www".to_owned(),
        "error processing PVC default/www-web-0: PVC is not bound".to_owned(),
    )];
    assert_eq!(
        failed_mount(&expected, &failed),
        "Unable to attach or mount volumes: unmounted volumes=[kube-api-access-x www], \
         unattached volumes=[], failed to process volumes=[www]: error processing PVC \
         default/www-web-0: PVC is not bound"
    );
}

mod affinity {
    use super::*;
    use k8s_openapi::api::core::v1::VolumeNodeAffinity;
    use proptest::prelude::*;

    fn check(terms: Value, labels: &[(&str, &str)]) -> Result<(), crate::claims::affinity::Error> {
        let affinity: VolumeNodeAffinity =
            serde_json::from_value(json!({"required": {"nodeSelectorTerms": terms}})).unwrap();
        let labels: BTreeMap<String, String> =
            labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        node_affinity_matches(&affinity, Node { name: "edge-1", labels: &labels })
    }

    fn expr(key: &str, operator: &str, values: &[&str]) -> Value {
        json!({"matchExpressions": [{"key": key, "operator": operator, "values": values}]})
    }

    #[test]
    fn k3_operators_match_as_the_apis_node_selectors() {
        let l = [("zone", "north"), ("gen", "5")];
        assert!(check(json!([expr("zone", "In", &["north", "south"])]), &l).is_ok());
        assert!(check(json!([expr("zone", "In", &["south"])]), &l).is_err());
        assert!(check(json!([expr("zone", "NotIn", &["south"])]), &l).is_ok());
        assert!(check(json!([expr("rack", "NotIn", &["a"])]), &l).is_ok());
        assert!(check(json!([expr("zone", "Exists", &[])]), &l).is_ok());
        assert!(check(json!([expr("rack", "Exists", &[])]), &l).is_err());
        assert!(check(json!([expr("rack", "DoesNotExist", &[])]), &l).is_ok());
        assert!(check(json!([expr("gen", "Gt", &["4"])]), &l).is_ok());
        assert!(check(json!([expr("gen", "Gt", &["5"])]), &l).is_err());
        assert!(check(json!([expr("gen", "Lt", &["6"])]), &l).is_ok());
        assert!(check(json!([expr("zone", "Lt", &["6"])]), &l).is_err());
        assert!(check(json!([expr("gen", "Gt", &["x"])]), &l).is_err());
        assert!(check(json!([expr("gen", "Bogus", &[])]), &l).is_err());
    }

    #[test]
    fn k3_terms_are_ored_requirements_anded_and_an_empty_term_matches_nothing() {
        let l = [("zone", "north")];
        let both = json!([{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["north"]},
            {"key": "rack", "operator": "Exists"},
        ]}]);
        assert!(check(both, &l).is_err());
        let either = json!([expr("zone", "In", &["south"]), expr("zone", "In", &["north"])]);
        assert!(check(either, &l).is_ok());
        assert!(check(json!([{}]), &l).is_err());
        assert!(check(json!([]), &l).is_err());
        let none: VolumeNodeAffinity = serde_json::from_value(json!({})).unwrap();
        let labels = BTreeMap::new();
        assert!(node_affinity_matches(&none, Node { name: "n", labels: &labels }).is_ok());
    }

    #[test]
    fn k3_match_fields_see_the_nodes_name() {
        let field = |op: &str, name: &str| json!([{"matchFields": [{"key": "metadata.name", "operator": op, "values": [name]}]}]);
        assert!(check(field("In", "edge-1"), &[]).is_ok());
        assert!(check(field("In", "edge-2"), &[]).is_err());
        assert!(check(field("NotIn", "edge-2"), &[]).is_ok());
        assert!(check(field("Exists", "edge-1"), &[]).is_err());
    }

    proptest! {
        /// In and NotIn on the same values always disagree; Exists and DoesNotExist too.
        #[test]
        fn k3_complementary_operators_disagree(
            value in proptest::option::of("[a-c]"),
            values in proptest::collection::vec("[a-c]", 1..3),
        ) {
            let labels: Vec<(&str, &str)> = value.iter().map(|v| ("k", v.as_str())).collect();
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            let in_ = check(json!([expr("k", "In", &values)]), &labels).is_ok();
            let not_in = check(json!([expr("k", "NotIn", &values)]), &labels).is_ok();
            prop_assert_ne!(in_, not_in);
            let exists = check(json!([expr("k", "Exists", &[])]), &labels).is_ok();
            let absent = check(json!([expr("k", "DoesNotExist", &[])]), &labels).is_ok();
            prop_assert_ne!(exists, absent);
        }
    }
}
