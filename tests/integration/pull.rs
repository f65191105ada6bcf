//! Pulling from a real loopback registry (`docker-registry`, images pushed with skopeo)
//! into the test containerd: anonymous and basic-auth pulls end up as complete, unpacked
//! image records; a second pull fetches no blob; each failure has its kind.

use outpost_tests::needs;
use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use outpost::runtime::containerd::Containerd;
use outpost::runtime::image::credentials::Keyring;
use outpost::runtime::image::pull::{PullErrorKind, PullOptions, pull};
use outpost_tests::containerd::{BUSYBOX_OCI, test_containerd, test_image};
use outpost_tests::registry::{Registry, free_port};

const NAMESPACE: &str = "outpost";
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// The test containerd and the busybox OCI tarball.
fn prerequisites() -> (PathBuf, PathBuf) {
    (test_containerd(), test_image(BUSYBOX_OCI))
}

fn ctr(socket: &Path, args: &[&str]) -> String {
    let out = Command::new("ctr")
        .arg("--address")
        .arg(socket)
        .args(["--namespace", NAMESPACE])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "ctr {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Asserts that `ctr images check` finds the image complete, unpacked, of `media_type`.
fn assert_complete_and_unpacked(socket: &Path, image: &str, digest: &str, media_type: &str) {
    let check = ctr(socket, &["images", "check", &format!("name=={image}")]);
    let line = check.lines().find(|l| l.starts_with(image)).unwrap_or_else(|| panic!("{check}"));
    assert!(line.contains(digest) && line.contains(media_type), "{line}");
    assert!(line.contains("complete") && line.trim_end().ends_with("true"), "{line}");
}

fn keyring(registry: &str, user: &str, password: &str) -> Keyring {
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let json = format!(r#"{{"auths": {{"{registry}": {{"auth": "{auth}"}}}}}}"#);
    Keyring::from_docker_config(json.as_bytes()).unwrap()
}

/// The config and layer digests of the manifest `repository:tag`, from the registry.
fn blob_digests(registry: &Registry, repository_tag: &str) -> Vec<String> {
    let (repository, tag) = repository_tag.split_once(':').unwrap();
    let out = Command::new("skopeo")
        .args(["inspect", "--raw", "--tls-verify=false"])
        .arg(format!("docker://{}/{repository}:{tag}", registry.host()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let manifest: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut digests = vec![manifest["config"]["digest"].as_str().unwrap().to_owned()];
    for layer in manifest["layers"].as_array().unwrap() {
        digests.push(layer["digest"].as_str().unwrap().to_owned());
    }
    digests
}

#[needs(containerd, registry)]
#[tokio::test]
async fn an_anonymous_pull_is_unpacked_and_a_second_pull_fetches_no_blob() {
    let (socket, tarball) = prerequisites();
    let registry = Registry::start();
    registry.push(&tarball, "test/busybox:1", false);
    let containerd = Containerd::connect(&socket).await.unwrap();
    let image = format!("{}/test/busybox:1", registry.host());

    let pulled =
        pull(&containerd, &image, &Keyring::default(), &PullOptions::default()).await.unwrap();
    assert_eq!(pulled.name, image);
    assert_complete_and_unpacked(&socket, &image, &pulled.digest, OCI_MANIFEST);
    let snapshots = ctr(&socket, &["snapshots", "--snapshotter", "overlayfs", "ls"]);
    assert!(snapshots.lines().any(|l| l.trim_end().ends_with("Committed")), "{snapshots}");

    // With the config and layers gone from the registry, only a pull that takes them
    // from containerd's store can succeed.
    for digest in blob_digests(&registry, "test/busybox:1") {
        std::fs::remove_file(registry.blob_data(&digest)).unwrap();
    }
    let again =
        pull(&containerd, &image, &Keyring::default(), &PullOptions::default()).await.unwrap();
    assert_eq!(again, pulled);
    assert_complete_and_unpacked(&socket, &image, &pulled.digest, OCI_MANIFEST);
    ctr(&socket, &["images", "rm", &image]);
}

#[needs(containerd, registry)]
#[tokio::test]
async fn a_docker_schema2_image_is_pulled() {
    let (socket, tarball) = prerequisites();
    let registry = Registry::start();
    registry.push(&tarball, "test/busybox-docker:2", true);
    let containerd = Containerd::connect(&socket).await.unwrap();
    let image = format!("{}/test/busybox-docker:2", registry.host());
    let pulled =
        pull(&containerd, &image, &Keyring::default(), &PullOptions::default()).await.unwrap();
    assert_complete_and_unpacked(&socket, &image, &pulled.digest, DOCKER_MANIFEST);
    ctr(&socket, &["images", "rm", &image]);
}

#[needs(containerd, registry)]
#[tokio::test]
async fn basic_auth_takes_the_keyring_credentials_and_refuses_wrong_ones() {
    let (socket, tarball) = prerequisites();
    let registry = Registry::start_with_auth("puller", "right-password");
    registry.push(&tarball, "private/busybox:1", false);
    let containerd = Containerd::connect(&socket).await.unwrap();
    let image = format!("{}/private/busybox:1", registry.host());
    let options = PullOptions::default();

    let anonymous = pull(&containerd, &image, &Keyring::default(), &options).await.unwrap_err();
    assert_eq!(anonymous.kind(), PullErrorKind::Unauthorized, "{anonymous}");

    let wrong = keyring(&registry.host(), "puller", "wrong-password");
    let refused = pull(&containerd, &image, &wrong, &options).await.unwrap_err();
    assert_eq!(refused.kind(), PullErrorKind::Unauthorized, "{refused}");
    let message = refused.to_string();
    assert!(message.contains(&image) && message.contains("puller"), "{message}");
    assert!(!message.contains("wrong-password"), "{message}");

    // A wrong credential first, the right one after it: the pull tries them in turn.
    let mut keys = keyring(&format!("http://{}/private", registry.host()), "puller", "wrong");
    keys.merge(keyring(&registry.host(), "puller", "right-password"));
    let pulled = pull(&containerd, &image, &keys, &options).await.unwrap();
    assert_complete_and_unpacked(&socket, &image, &pulled.digest, OCI_MANIFEST);
    ctr(&socket, &["images", "rm", &image]);
}

#[needs(containerd, registry)]
#[tokio::test]
async fn a_missing_tag_is_not_found() {
    let (socket, tarball) = prerequisites();
    let registry = Registry::start();
    registry.push(&tarball, "test/busybox:1", false);
    let containerd = Containerd::connect(&socket).await.unwrap();
    for missing in ["test/busybox:nope", "test/nothing:1"] {
        let image = format!("{}/{missing}", registry.host());
        let error = pull(&containerd, &image, &Keyring::default(), &PullOptions::default())
            .await
            .unwrap_err();
        assert_eq!(error.kind(), PullErrorKind::NotFound, "{error}");
        assert!(error.to_string().contains(&image), "{error}");
    }
}

#[needs(containerd)]
#[tokio::test]
async fn a_registry_that_is_down_is_unreachable() {
    let (socket, _) = prerequisites();
    let containerd = Containerd::connect(&socket).await.unwrap();
    let image = format!("127.0.0.1:{}/test/busybox:1", free_port());
    let error =
        pull(&containerd, &image, &Keyring::default(), &PullOptions::default()).await.unwrap_err();
    assert_eq!(error.kind(), PullErrorKind::Unreachable, "{error}");
    assert!(error.to_string().contains(&image), "{error}");
}

#[needs(containerd)]
#[tokio::test]
async fn a_bad_reference_is_invalid() {
    let (socket, _) = prerequisites();
    let containerd = Containerd::connect(&socket).await.unwrap();
    let error =
        pull(&containerd, "Not/A/Valid:::ref", &Keyring::default(), &PullOptions::default())
            .await
            .unwrap_err();
    assert_eq!(error.kind(), PullErrorKind::InvalidReference, "{error}");
}
