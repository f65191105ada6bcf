//! D3: the spec directories are read as the CDI library scans them, and the host's
//! device nodes looked at with `lstat`.

use std::path::Path;

use oci_spec::runtime::{LinuxDeviceType, Spec};

use super::*;

const SPEC: &str = r#"{"cdiVersion": "0.5.0", "kind": "vendor.com/null", "devices": [
    {"name": "dev", "containerEdits": {"env": ["FROM={from}"],
     "deviceNodes": [{"path": "/dev/vendor-null", "hostPath": "/dev/null"}]}}]}"#;

fn spec_text(from: &str) -> String {
    SPEC.replace("{from}", from)
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn d3_spec_files_are_read_by_directory_then_name() {
    let dir = tempfile::tempdir().unwrap();
    let (etc, run) = (dir.path().join("etc"), dir.path().join("run"));
    write(&run.join("b.json"), "{}");
    write(&run.join("a.yaml"), "{}");
    write(&etc.join("z.json"), "{}");
    write(&etc.join(".json"), "{}");
    write(&etc.join("notes.txt"), "not a spec");
    write(&etc.join("old.yml"), "not read: .yml");
    write(&etc.join("sub.json/inner.json"), "{}");
    let missing = dir.path().join("missing");
    let (files, errors) = read_spec_dirs(&[missing, etc.clone(), run.clone()]);
    let read: Vec<(PathBuf, usize)> = files.into_iter().map(|f| (f.path, f.priority)).collect();
    assert_eq!(
        read,
        [
            (etc.join(".json"), 1),
            (etc.join("z.json"), 1),
            (run.join("a.yaml"), 2),
            (run.join("b.json"), 2),
        ]
    );
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn d3_a_directory_that_cannot_be_read_ends_the_scan() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    write(&file, "not a directory");
    let later = dir.path().join("later");
    write(&later.join("a.json"), "{}");
    let (files, errors) = read_spec_dirs(&[file.clone(), later]);
    assert!(files.is_empty());
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].starts_with(&format!("cannot read the CDI spec directory {}", file.display()))
    );
}

#[test]
fn d3_host_nodes_are_looked_at_without_following_links() {
    let null = host_device(Path::new("/dev/null")).unwrap().unwrap();
    assert_eq!((null.typ, null.major, null.minor), (HostDeviceType::Char, 1, 3));
    assert_eq!(null.file_mode, 0o666);
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("null-link");
    std::os::unix::fs::symlink("/dev/null", &link).unwrap();
    assert_eq!(host_device(&link).unwrap(), None);
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o640)).unwrap();
    let fifo = host_device(&fifo).unwrap().unwrap();
    assert_eq!(fifo.typ, HostDeviceType::Fifo);
    assert_eq!(host_device(dir.path()).unwrap(), None);
    let missing = dir.path().join("missing");
    let error = host_device(&missing).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::NotFound);
    assert!(error.to_string().starts_with(&format!("lstat {}: ", missing.display())), "{error}");
}

#[tokio::test]
async fn d3_devices_are_injected_from_the_later_directory() {
    let dir = tempfile::tempdir().unwrap();
    let (etc, run) = (dir.path().join("etc"), dir.path().join("run"));
    write(&etc.join("vendor.json"), &spec_text("etc"));
    write(&run.join("vendor.json"), &spec_text("run"));
    write(&run.join("broken.yaml"), "kind: [");
    let spec =
        inject(Spec::default(), vec!["vendor.com/null=dev".into()], vec![etc, run]).await.unwrap();
    let env = spec.process().as_ref().unwrap().env().clone().unwrap();
    assert!(env.contains(&"FROM=run".to_owned()), "{env:?}");
    let device = &spec.linux().as_ref().unwrap().devices().as_ref().unwrap()[0];
    assert_eq!(device.path(), Path::new("/dev/vendor-null"));
    assert_eq!((device.typ(), device.major(), device.minor()), (LinuxDeviceType::C, 1, 3));
}

#[tokio::test]
async fn d3_an_unresolved_device_names_itself_the_directories_and_the_files_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path().join("etc");
    write(&etc.join("broken.yaml"), "kind: [");
    write(&etc.join("vendor.json"), &spec_text("etc"));
    let run = dir.path().join("run");
    let devices = vec!["vendor.com/null=dev".into(), "vendor.com/gpu=0".into()];
    let error = inject(Spec::default(), devices, vec![etc.clone(), run.clone()]).await.unwrap_err();
    let message = error.to_string();
    let expected = format!(
        "CDI device injection failed: unresolvable CDI devices vendor.com/gpu=0 (CDI spec \
         directories: {}, {}; left out: failed to parse CDI Spec {:?}: failed to unmarshal CDI Spec: ",
        etc.display(),
        run.display(),
        etc.join("broken.yaml"),
    );
    assert!(message.starts_with(&expected), "{message}\n{expected}");
}
