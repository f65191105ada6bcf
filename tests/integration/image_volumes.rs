//! End to end: image volumes (KEP-4639, V4) on a real containerd, from the loopback test
//! registry: the artifact image `cargo xtask images` builds (data files only) is pulled
//! per the volume's `pullPolicy`, mounted read-only in a busybox container (whole and by
//! `subPath`), and its mount and snapshot view go with the pod; an API pod's is pulled
//! with its pull secrets. A volume whose image cannot be had holds only the containers
//! that mount it, with kubelet's pull errors.

use std::time::Duration;

use outpost_tests::containerd::{BUSYBOX_IMAGE, MODEL_OCI, MODEL_WEIGHTS, test_image};
use outpost_tests::needs;
use outpost_tests::pods::{Node, eventually, wait_pod};
use outpost_tests::registry::Registry;
use outpost_tests::workload::{Workload, delete_and_wait, is_running, status_of, text};

const LONG: Duration = Duration::from_secs(60);
/// The prefix of the snapshot keys of image volumes (`layout::IMAGE_VOLUME_KEY_PREFIX`).
const KEY_PREFIX: &str = "outpost-image-volume/";

/// kubernetes.io's image-volume example, with the test's images: the volume mounted whole
/// (its `readOnly: false` overruled) and its `model` directory by `subPath`.
fn image_volume_pod(reference: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: image-volume
spec:
  containers:
  - name: shell
    command: ["sleep", "3600"]
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    volumeMounts:
    - name: volume
      mountPath: /volume
      readOnly: false
    - name: volume
      mountPath: /weights
      subPath: model
  volumes:
  - name: volume
    image:
      reference: {reference}
      pullPolicy: Always
"#
    )
}

/// The image volume snapshot views in the node's containerd namespace.
fn views(node: &Node) -> Vec<String> {
    let listed = node.ctr(&["snapshots", "--snapshotter", "overlayfs", "ls"]);
    listed.lines().filter(|l| l.starts_with(KEY_PREFIX)).map(str::to_owned).collect()
}

/// The mount points under the node's directory of image volumes.
fn image_mounts(node: &Node) -> Vec<String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let dir = node.dir.path().to_string_lossy().into_owned();
    mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| m.starts_with(&dir) && m.contains("kubernetes.io~image"))
        .map(str::to_owned)
        .collect()
}

/// V4: `pullPolicy: Always` pulls the artifact from the registry (kubelet's Pulling and
/// Pulled Events on the pod); the container reads its files, whole and by `subPath`, and
/// cannot write there; the pod's deletion leaves no mount and no snapshot view.
#[needs(pods, registry)]
#[test]
fn v4_an_image_volume_is_pulled_mounted_read_only_and_removed_with_its_pod() {
    let registry = Registry::start();
    registry.push(&test_image(MODEL_OCI), "test/model:v1", false);
    let reference = format!("{}/test/model:v1", registry.host());
    let node = Node::new();
    let w = Workload::start(&node);

    node.put("image-volume.yaml", &image_volume_pod(&reference));
    let name = "image-volume-edge-1";
    let pod = wait_pod(&w.agent, name, LONG, |p| is_running(status_of(p, "shell")));
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_owned();
    let pod_path = format!("default/{name}");

    let read = w.exec(&pod_path, None, &["cat", "/volume/model/weights.txt"]);
    let stdout = |out: &std::process::Output| String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(stdout(&read), MODEL_WEIGHTS, "the volume holds the image's files: {}", text(&read));
    let config = w.exec(&pod_path, None, &["cat", "/weights/config.json"]);
    assert!(stdout(&config).contains("outpost-test-model"), "subPath: {}", text(&config));
    let write = w.exec(&pod_path, None, &["touch", "/volume/model/new"]);
    assert!(!write.status.success(), "a write succeeded: {}", text(&write));
    assert!(text(&write).contains("Read-only file system"), "{}", text(&write));

    let events = w.events("default", name);
    let said = |reason: &str, words: &str| {
        events.iter().any(|e| {
            e["reason"] == reason && e["message"].as_str().is_some_and(|m| m.contains(words))
        })
    };
    assert!(said("Pulling", &format!("Pulling image \"{reference}\"")), "{events:?}");
    assert!(said("Pulled", &format!("Successfully pulled image \"{reference}\"")), "{events:?}");

    let key = format!("{KEY_PREFIX}{uid}/volume");
    assert!(views(&node).iter().any(|v| v.starts_with(&key)), "{:?}", views(&node));
    assert_eq!(image_mounts(&node).len(), 1, "one mount for the pod's volume");

    delete_and_wait(&node, &w.agent, &[("image-volume.yaml", name)]);
    eventually("no image volume snapshot is left", LONG, || views(&node).is_empty());
    assert!(image_mounts(&node).is_empty(), "{:?}", image_mounts(&node));
}

/// V4: an image volume whose image is not in the registry holds the container that
/// mounts it with kubelet's `ErrImagePull` (then `ImagePullBackOff`) and a Failed Event;
/// with `pullPolicy: Never` and no image, `ErrImageNeverPull`; a `subPath` to a file of
/// the image, `CreateContainerError` (containerd mounts directories only). A container
/// of the pod that mounts none of them runs.
#[needs(pods, registry)]
#[test]
fn v4_an_image_volume_that_cannot_be_pulled_holds_only_its_containers() {
    let registry = Registry::start();
    registry.push(&test_image(MODEL_OCI), "test/model:v1", false);
    let model = format!("{}/test/model:v1", registry.host());
    let missing = format!("{}/test/missing:v1", registry.host());
    let node = Node::new();
    let w = Workload::start(&node);
    let container = |name: &str, mounts: &str| {
        format!(
            "  - name: {name}\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    \
             command: [sleep, '3600']\n    volumeMounts: [{mounts}]\n"
        )
    };
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: missing\nspec:\n  containers:\n{}{}{}{}  \
         volumes:\n  - name: pulled\n    image: {{reference: '{missing}'}}\n  - name: never\n    \
         image: {{reference: 'outpost.test/absent:v1', pullPolicy: Never}}\n  - name: model\n    \
         image: {{reference: '{model}'}}\n",
        container("app", "{name: pulled, mountPath: /data}"),
        container("local", "{name: never, mountPath: /data}"),
        container("file", "{name: model, mountPath: /w, subPath: model/weights.txt}"),
        container("other", ""),
    );
    node.put("missing.yaml", &manifest);
    let name = "missing-edge-1";
    let pod = wait_pod(&w.agent, name, LONG, |p| {
        let waiting = |c: &str| status_of(p, c)["state"]["waiting"]["reason"].clone();
        is_running(status_of(p, "other"))
            && (waiting("app") == "ErrImagePull" || waiting("app") == "ImagePullBackOff")
            && waiting("local") == "ErrImageNeverPull"
            && waiting("file") == "CreateContainerError"
    });
    let file = status_of(&pod, "file")["state"]["waiting"]["message"].as_str().unwrap_or_default();
    assert!(file.contains("is not a directory"), "containerd's rule: {file}");
    let message =
        status_of(&pod, "local")["state"]["waiting"]["message"].as_str().unwrap_or_default();
    let never =
        "Container image \"outpost.test/absent:v1\" is not present with pull policy of Never";
    assert!(message.contains(never), "kubelet's words: {message}");
    eventually("a Failed Event names the image", LONG, || {
        w.events("default", name).iter().any(|e| {
            e["reason"] == "Failed"
                && e["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(&format!("Failed to pull image \"{missing}\"")))
        })
    });
    let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
    let only_model =
        views(&node).iter().all(|v| v.starts_with(&format!("{KEY_PREFIX}{uid}/model ")));
    assert!(only_model, "no view without its image: {:?}", views(&node));

    delete_and_wait(&node, &w.agent, &[("missing.yaml", name)]);
    eventually("no image volume snapshot is left", LONG, || views(&node).is_empty());
    assert!(image_mounts(&node).is_empty(), "{:?}", image_mounts(&node));
}

/// V4: an API pod's image volume is pulled with the pod's `imagePullSecrets`, as its
/// containers' images are: the registry wants a password, which only the secret has.
#[needs(pods, registry)]
#[test]
fn v4_an_api_pods_image_volume_is_pulled_with_its_pull_secrets() {
    use base64::Engine as _;
    use outpost_tests::api_pods::{Cluster, api_pod, read};
    use serde_json::json;

    let registry = Registry::start_with_auth("puller", "right-password");
    registry.push(&test_image(MODEL_OCI), "private/model:v1", false);
    let reference = format!("{}/private/model:v1", registry.host());
    let c = Cluster::start();
    let auth = base64::engine::general_purpose::STANDARD.encode("puller:right-password");
    let config = json!({"auths": {registry.host(): {"auth": auth}}}).to_string();
    c.create(json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": "regcred", "namespace": "default"},
        "stringData": {".dockerconfigjson": config},
    }));
    c.create_pod(api_pod(
        "model",
        json!({"volumeMounts": [{"name": "model", "mountPath": "/model"}]}),
        json!({
            "imagePullSecrets": [{"name": "regcred"}],
            "automountServiceAccountToken": false,
            "volumes": [{"name": "model", "image": {"reference": reference}}],
        }),
    ));
    let pid = c.pid_of("default", "model", "main");
    assert_eq!(read(pid, "/model/model/weights.txt"), MODEL_WEIGHTS);
    let pulled = c.events("model").iter().any(|e| {
        e["reason"] == "Pulled"
            && e["message"].as_str().is_some_and(|m| m.contains(&format!("\"{reference}\"")))
    });
    assert!(pulled, "{:?}", c.events("model"));
}
