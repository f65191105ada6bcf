//! `--images-dir`: tarballs in the directory are imported into a real containerd, once
//! per version of the file, and only once their writer is done.
//!
//! Each test imports the busybox test image under a name of its own (the OCI tarball
//! repacked with another `io.containerd.image.name`), so that tests running in parallel,
//! here and in other modules, do not touch each other's images.

use outpost_tests::needs;
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use outpost::runtime::Containerd;
use outpost::runtime::image::watch::{ImagesDir, Summary};
use outpost_tests::containerd::{BUSYBOX_IMAGE, BUSYBOX_OCI, test_containerd, test_image};
use tempfile::TempDir;

const NAMESPACE: &str = "outpost";

struct Setup {
    tmp: TempDir,
    containerd: Containerd,
    socket: PathBuf,
    /// The test image's OCI tarball.
    oci: PathBuf,
}

impl Setup {
    async fn new() -> Setup {
        let socket = test_containerd();
        let oci = test_image(BUSYBOX_OCI);
        let containerd = Containerd::connect(&socket).await.unwrap();
        let tmp = tempfile::tempdir().unwrap();
        Setup { tmp, containerd, socket, oci }
    }

    fn dir(&self) -> PathBuf {
        self.tmp.path().join("images")
    }

    fn record(&self) -> PathBuf {
        self.tmp.path().join("images-imported.json")
    }

    fn open(&self) -> ImagesDir {
        ImagesDir::open(self.dir(), self.containerd.clone(), self.record()).unwrap()
    }

    /// The busybox OCI tarball with the image named `outpost.test/<name>:latest`.
    fn retagged(&self, name: &str) -> (Vec<u8>, String) {
        let work = self.tmp.path().join(format!("repack-{name}"));
        std::fs::create_dir_all(&work).unwrap();
        run(Command::new("tar").arg("-xf").arg(&self.oci).arg("-C").arg(&work));
        let image = format!("outpost.test/{name}:latest");
        let index = std::fs::read_to_string(work.join("index.json")).unwrap();
        assert!(index.contains(BUSYBOX_IMAGE), "{index}");
        std::fs::write(work.join("index.json"), index.replace(BUSYBOX_IMAGE, &image)).unwrap();
        let tarball = work.join("out.tar");
        run(Command::new("tar").arg("-cf").arg(&tarball).arg("-C").arg(&work).args([
            "oci-layout",
            "index.json",
            "blobs",
        ]));
        (std::fs::read(tarball).unwrap(), image)
    }

    fn has_image(&self, image: &str) -> bool {
        let out = Command::new("ctr")
            .arg("--address")
            .arg(&self.socket)
            .args(["--namespace", NAMESPACE, "images", "ls", "-q"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).lines().any(|l| l.trim() == image)
    }

    fn remove_image(&self, image: &str) {
        let _ = Command::new("ctr")
            .arg("--address")
            .arg(&self.socket)
            .args(["--namespace", NAMESPACE, "images", "rm", image])
            .output();
    }

    fn recorded(&self, file: &str) -> Option<serde_json::Value> {
        let bytes = std::fs::read(self.record()).ok()?;
        let record: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        record["files"].get(file).cloned()
    }
}

fn run(command: &mut Command) {
    let status = command.status().unwrap();
    assert!(status.success(), "{command:?}: {status}");
}

fn unique(what: &str) -> String {
    format!("images-dir-{what}-{}-{}", std::process::id(), fastrand::u32(..))
}

#[needs(containerd)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tarballs_present_at_start_are_imported_once_per_version() {
    let setup = Setup::new().await;
    let (bytes, image) = setup.retagged(&unique("start"));
    std::fs::create_dir_all(setup.dir()).unwrap();
    std::fs::write(setup.dir().join("app.tar"), &bytes).unwrap();

    let summary = setup.open().import_present().await.unwrap();
    assert_eq!(summary.imported, ["app.tar"], "{summary:?}");
    assert!(setup.has_image(&image), "{image} is not in containerd");
    let entry = setup.recorded("app.tar").unwrap();
    assert_eq!(entry["size"], bytes.len());
    assert_eq!(entry["images"], serde_json::json!([image]));

    // A restart: nothing to import.
    let summary = setup.open().import_present().await.unwrap();
    assert_eq!(
        summary,
        Summary { unchanged: vec!["app.tar".into()], ..Summary::default() },
        "imported again after a restart"
    );

    // The file replaced (same bytes, another inode, as `mv` leaves it): imported again.
    setup.remove_image(&image);
    let staged = setup.tmp.path().join("staged.tar");
    std::fs::write(&staged, &bytes).unwrap();
    std::fs::rename(&staged, setup.dir().join("app.tar")).unwrap();
    let summary = setup.open().import_present().await.unwrap();
    assert_eq!(summary.imported, ["app.tar"], "{summary:?}");
    assert!(setup.has_image(&image), "{image} was not imported again");
    setup.remove_image(&image);
}

#[needs(containerd)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_tarball_fails_alone() {
    let setup = Setup::new().await;
    let (bytes, image) = setup.retagged(&unique("good"));
    std::fs::create_dir_all(setup.dir()).unwrap();
    std::fs::write(setup.dir().join("good.tar"), &bytes).unwrap();
    // Cut short inside its first entry, as a copy interrupted early. (A tarball cut later
    // can still import: blobs already in containerd's store are not read again.)
    std::fs::write(setup.dir().join("cut.tar"), &bytes[..600]).unwrap();
    std::fs::write(setup.dir().join("noise.tar"), b"this is not a tarball").unwrap();
    std::fs::write(setup.dir().join("notes.txt"), b"not a .tar: ignored").unwrap();

    let summary = setup.open().import_present().await.unwrap();
    assert_eq!(summary.imported, ["good.tar"], "{summary:?}");
    assert_eq!(summary.failed, ["cut.tar", "noise.tar"], "{summary:?}");
    assert!(setup.has_image(&image));
    assert!(setup.recorded("cut.tar").is_none() && setup.recorded("noise.tar").is_none());
    setup.remove_image(&image);
}

#[needs(containerd)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tarball_copied_in_later_is_imported_once_it_is_closed() {
    let setup = Setup::new().await;
    let (bytes, image) = setup.retagged(&unique("later"));
    let mut images = setup.open();
    assert_eq!(images.import_present().await.unwrap(), Summary::default());
    let watcher = tokio::spawn(images.run());

    // Written slowly, in chunks: nothing may be imported before the file is closed.
    let path = setup.dir().join("later.tar");
    let mut file = std::fs::File::create(&path).unwrap();
    for chunk in bytes.chunks(bytes.len() / 8 + 1) {
        file.write_all(chunk).unwrap();
        file.flush().unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(setup.recorded("later.tar").is_none(), "imported while being written");
    }
    drop(file);
    eventually(|| setup.recorded("later.tar").is_some()).await;
    assert_eq!(setup.recorded("later.tar").unwrap()["size"], bytes.len());
    assert!(setup.has_image(&image));

    // Moved in from elsewhere on the same filesystem: imported too.
    let (bytes, moved_image) = setup.retagged(&unique("moved"));
    let staged = setup.tmp.path().join("moved.tar");
    std::fs::write(&staged, &bytes).unwrap();
    std::fs::rename(&staged, setup.dir().join("moved.tar")).unwrap();
    eventually(|| setup.recorded("moved.tar").is_some()).await;
    assert!(setup.has_image(&moved_image));

    assert!(!watcher.is_finished(), "the watcher stopped: {:?}", watcher.await);
    watcher.abort();
    setup.remove_image(&image);
    setup.remove_image(&moved_image);
}

/// Waits (generously, to detect a hang only) until `ready` holds.
async fn eventually(ready: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while !ready() {
        assert!(tokio::time::Instant::now() < deadline, "timed out");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
