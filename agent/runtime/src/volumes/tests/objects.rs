//! configMap, secret, downwardAPI and projected volumes on disk (SEMANTICS.md V1).

use std::os::unix::fs::MetadataExt as _;
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use outpost_host::Kernel;

use super::super::*;
use super::{Dirs, dirs, mode, pod, root};
use crate::spec::projection::{Object, Reference, Resolution};

fn config_map(name: &str, data: &[(&str, &str)]) -> (Reference, Resolution) {
    let data = data.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let object = ConfigMap { data: Some(data), ..ConfigMap::default() };
    (Reference::ConfigMap(name.to_owned()), Resolution::Found(Object::ConfigMap(Arc::new(object))))
}

fn secret(name: &str, data: &[(&str, &str)]) -> (Reference, Resolution) {
    let data =
        data.iter().map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec()))).collect();
    let object = Secret { data: Some(data), ..Secret::default() };
    (Reference::Secret(name.to_owned()), Resolution::Found(Object::Secret(Arc::new(object))))
}

fn absent(reference: Reference) -> (Reference, Resolution) {
    (reference, Resolution::Absent)
}

fn resolved(entries: Vec<(Reference, Resolution)>) -> Resolved {
    Resolved(entries.into_iter().collect())
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

const CONFIG: &str = r#"
spec:
  volumes:
  - {name: cfg, configMap: {name: app}}
  - {name: opt, configMap: {name: maybe, optional: true}}
  - {name: info, downwardAPI: {items: [{path: name, fieldRef: {fieldPath: metadata.name}}]}}
  containers:
  - name: app
    image: b
    volumeMounts:
    - {name: cfg, mountPath: /etc/app}
    - {name: cfg, mountPath: /etc/one.conf, subPath: one.conf}
    - {name: info, mountPath: /info, subPath: new/dir}
"#;

fn prepared(resolved: &Resolved) -> (Dirs, Pod) {
    let dirs = dirs();
    let pod = pod(CONFIG);
    prepare(&Kernel, &dirs.pod_dir, &pod, &[], &dirs.dns, resolved).unwrap();
    (dirs, pod)
}

#[test]
fn v1_config_map_and_downward_api_volumes_are_written() {
    let objects = resolved(vec![
        config_map("app", &[("one.conf", "1"), ("two.conf", "2")]),
        config_map("maybe", &[("x", "y")]),
    ]);
    let (dirs, _pod) = prepared(&objects);
    let cfg = dirs.pod_dir.join("volumes/kubernetes.io~configmap/cfg");
    assert_eq!(mode(&cfg), 0o777);
    assert_eq!(read(&cfg.join("one.conf")), "1");
    assert_eq!(std::fs::read_link(cfg.join("two.conf")).unwrap(), Path::new("..data/two.conf"));
    assert_eq!(mode(&cfg.join("two.conf")), 0o644);
    let info = dirs.pod_dir.join("volumes/kubernetes.io~downward-api/info");
    assert_eq!(read(&info.join("name")), "web-node1");
    assert!(!info.join("new").exists(), "no subPath directory in a written volume");
    assert_eq!(read(&dirs.pod_dir.join("volumes/kubernetes.io~configmap/opt/x")), "y");
}

#[test]
fn v1_refresh_updates_in_place_and_keeps_content_it_cannot_replace() {
    let first =
        resolved(vec![config_map("app", &[("one.conf", "1")]), config_map("maybe", &[("x", "y")])]);
    let (dirs, pod) = prepared(&first);
    let cfg = dirs.pod_dir.join("volumes/kubernetes.io~configmap/cfg");
    let opt = dirs.pod_dir.join("volumes/kubernetes.io~configmap/opt");

    let edited =
        resolved(vec![config_map("app", &[("one.conf", "2")]), config_map("maybe", &[("x", "y")])]);
    refresh(&Kernel, &dirs.pod_dir, &pod, &edited).unwrap();
    assert_eq!(read(&cfg.join("one.conf")), "2");

    // The required one deleted, the optional one too: kubelet keeps the first and empties
    // the second.
    let deleted = resolved(vec![
        absent(Reference::ConfigMap("app".to_owned())),
        absent(Reference::ConfigMap("maybe".to_owned())),
    ]);
    let errors = refresh(&Kernel, &dirs.pod_dir, &pod, &deleted).unwrap_err();
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        ["MountVolume.SetUp failed for volume \"cfg\" : configmap \"app\" not found"]
    );
    assert_eq!(errors[0].volume(), Some("cfg"));
    assert_eq!(read(&cfg.join("one.conf")), "2");
    assert!(!opt.join("x").exists());

    std::fs::remove_dir_all(&dirs.pod_dir).unwrap();
    refresh(&Kernel, &dirs.pod_dir, &pod, &edited).unwrap();
    assert!(!dirs.pod_dir.exists(), "a pod that is not set up is left alone");
}

#[test]
fn v1_a_missing_required_object_fails_the_set_up_with_kubelets_message() {
    let dirs = dirs();
    let error = prepare(&Kernel, &dirs.pod_dir, &pod(CONFIG), &[], &dirs.dns, &Resolved::default())
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "MountVolume.SetUp failed for volume \"cfg\" : couldn't get configMap default/app: not \
         fetched yet"
    );
    let missing = resolved(vec![absent(Reference::ConfigMap("app".to_owned()))]);
    let error =
        prepare(&Kernel, &dirs.pod_dir, &pod(CONFIG), &[], &dirs.dns, &missing).unwrap_err();
    assert_eq!(
        error.to_string(),
        "MountVolume.SetUp failed for volume \"cfg\" : configmap \"app\" not found"
    );
    assert_eq!(error.volume(), Some("cfg"));
}

const SECRET: &str = r#"
spec:
  securityContext: {fsGroup: 4242}
  volumes:
  - {name: creds, secret: {secretName: db, defaultMode: 0o400}}
  containers: [{name: app, image: b}]
"#;

#[test]
fn v1_secrets_live_on_a_tmpfs_given_to_the_fs_group() {
    if !root() {
        return;
    }
    let dirs = dirs();
    let pod = pod(SECRET);
    let objects = resolved(vec![secret("db", &[("password", "hunter2")])]);
    prepare(&Kernel, &dirs.pod_dir, &pod, &[], &dirs.dns, &objects).unwrap();
    let creds = dirs.pod_dir.join("volumes/kubernetes.io~secret/creds");
    assert!(mounts::mounted(&Kernel, &creds).unwrap());
    assert_eq!(read(&creds.join("password")), "hunter2");
    let file = std::fs::metadata(creds.join("password")).unwrap();
    assert_eq!((file.gid(), file.mode() & 0o7777), (4242, 0o440));
    assert_eq!(mode(&creds), 0o3777, "tmpfs's 1777, with the group's setgid");

    // Across agent restarts: kept, not mounted twice.
    prepare(&Kernel, &dirs.pod_dir, &pod, &[], &dirs.dns, &objects).unwrap();
    assert_eq!(
        super::super::mounts::under(&Kernel, &creds.canonicalize().unwrap()).unwrap().len(),
        1
    );

    // After a reboot (no tmpfs): refresh leaves it to the set-up, which mounts it again.
    nix::mount::umount(&creds).unwrap();
    refresh(&Kernel, &dirs.pod_dir, &pod, &objects).unwrap();
    assert!(!creds.join("password").exists(), "never written to the disk");
    prepare(&Kernel, &dirs.pod_dir, &pod, &[], &dirs.dns, &objects).unwrap();
    assert!(mounts::mounted(&Kernel, &creds).unwrap());
    assert_eq!(read(&creds.join("password")), "hunter2");
    cleanup(&Kernel, &dirs.pod_dir).unwrap();
}

#[test]
fn v1_a_sub_path_bind_keeps_the_file_of_the_container_start() {
    if !root() {
        return;
    }
    let (dirs, pod) = prepared(&resolved(vec![
        config_map("app", &[("one.conf", "first")]),
        config_map("maybe", &[]),
    ]));
    // What runc does for a subPath mount: bind the volume's path, a symlink into ..data,
    // which the kernel resolves once, at mount time.
    let cfg = dirs.pod_dir.join("volumes/kubernetes.io~configmap/cfg");
    let target = dirs.host.join("one.conf");
    std::fs::write(&target, "").unwrap();
    let flags = nix::mount::MsFlags::MS_BIND;
    nix::mount::mount(Some(&cfg.join("one.conf")), &target, None::<&str>, flags, None::<&str>)
        .unwrap();
    let edited =
        resolved(vec![config_map("app", &[("one.conf", "second")]), config_map("maybe", &[])]);
    let refreshed = refresh(&Kernel, &dirs.pod_dir, &pod, &edited);
    let seen = read(&target);
    nix::mount::umount(&target).unwrap();
    refreshed.unwrap();
    assert_eq!(read(&cfg.join("one.conf")), "second");
    assert_eq!(seen, "first", "the subPath mount is not updated, as in kubelet");
}
