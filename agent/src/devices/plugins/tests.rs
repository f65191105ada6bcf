use std::os::unix::fs::symlink;
use std::os::unix::net::UnixListener;

use outpost_kubelet_api::deviceplugin::v1beta1 as api;

use super::directory::{cleanup, listen};
use super::registration::validate;
use super::{CHECKPOINT, Error};
use crate::devices::socket::identity;

fn request(version: &str, resource: &str) -> api::RegisterRequest {
    api::RegisterRequest {
        version: version.to_owned(),
        endpoint: "plugin.sock".to_owned(),
        resource_name: resource.to_owned(),
        options: None,
    }
}

/// D1: a registration is refused with kubelet's words when its version is not served or
/// its resource is not an extended resource; the version is checked first.
#[test]
fn d1_registration_is_validated_with_kubelet_s_messages() {
    assert_eq!(validate(&request("v1beta1", "example.com/serial")), Ok(()));
    assert_eq!(
        validate(&request("v1alpha", "example.com/serial")).unwrap_err(),
        "requested API version \"v1alpha\" is not supported by kubelet. Supported version is \
         [\"v1beta1\"]"
    );
    assert_eq!(
        validate(&request("", "cpu")).unwrap_err(),
        "requested API version \"\" is not supported by kubelet. Supported version is [\"v1beta1\"]"
    );
    for bad in ["cpu", "serial", "kubernetes.io/serial", "requests.example.com/x", "Example.com/x"]
    {
        assert_eq!(
            validate(&request("v1beta1", bad)).unwrap_err(),
            format!("the ResourceName \"{bad}\" is invalid")
        );
    }
}

/// D1: the cleanup at start removes the sockets (and links to sockets), and leaves the
/// checkpoint, directories, other files and what cannot be looked at.
#[test]
fn d1_cleanup_removes_sockets_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let _plugin = UnixListener::bind(path("plugin.sock")).unwrap();
    let _kubelet = UnixListener::bind(path("kubelet.sock")).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("target.sock");
    let _target = UnixListener::bind(&target).unwrap();
    std::fs::write(path(CHECKPOINT), "{}").unwrap();
    std::fs::write(path("DEPRECATION"), "").unwrap();
    std::fs::write(path("notes.txt"), "kept").unwrap();
    std::fs::create_dir(path("sub.sock")).unwrap();
    let _inner = UnixListener::bind(path("sub.sock/inner.sock")).unwrap();
    symlink(&target, path("link.sock")).unwrap();
    symlink(path("nowhere"), path("dangling.sock")).unwrap();
    cleanup(dir.path()).unwrap();
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["DEPRECATION", "dangling.sock", CHECKPOINT, "notes.txt", "sub.sock"]);
    assert!(target.exists(), "the link to a socket is removed, not its target");
    assert!(path("sub.sock/inner.sock").exists(), "the cleanup does not go into directories");
}

/// A checkpoint that is a socket is still the checkpoint's name: left.
#[test]
fn d1_cleanup_leaves_the_checkpoint_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let _checkpoint = UnixListener::bind(dir.path().join(CHECKPOINT)).unwrap();
    cleanup(dir.path()).unwrap();
    assert!(dir.path().join(CHECKPOINT).exists());
}

#[test]
fn cleanup_of_a_missing_directory_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let error = cleanup(&missing).unwrap_err();
    assert!(matches!(&error, Error::Directory { dir, .. } if *dir == missing), "{error}");
}

/// Listening replaces whatever is at the socket's path; the identity tells the new
/// socket from the old.
#[test]
fn listen_replaces_the_socket_and_tells_it_apart() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("kubelet.sock");
    std::fs::write(&socket, "stale").unwrap();
    let stale = identity(&socket);
    let (_listener, first) = listen(&socket).unwrap();
    assert_ne!(Some(first), stale);
    assert_eq!(identity(&socket), Some(first));
    let (_listener, second) = listen(&socket).unwrap();
    assert_ne!(first, second);
    assert_eq!(identity(&socket), Some(second));
}
