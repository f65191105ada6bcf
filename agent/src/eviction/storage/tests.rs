use super::{disk_usage, other_files};

#[test]
fn disk_usage_counts_the_blocks_of_a_tree() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(disk_usage(&dir.path().join("missing")), 0);
    std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
    std::fs::write(dir.path().join("a/b/data"), vec![7u8; 256 * 1024]).unwrap();
    std::fs::write(dir.path().join("top"), vec![7u8; 64 * 1024]).unwrap();
    // A symlink's target is not counted.
    std::os::unix::fs::symlink("/usr", dir.path().join("a/link")).unwrap();
    let used = disk_usage(dir.path());
    assert!(used >= 320 * 1024, "{used}");
    assert!(used < 1024 * 1024, "{used}");
    let file = disk_usage(&dir.path().join("top"));
    assert!((64 * 1024..128 * 1024).contains(&file), "{file}");
}

#[test]
fn a_pods_other_files_are_its_own_files_and_local_volumes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("etc-hosts"), vec![1u8; 8192]).unwrap();
    let config = dir.path().join("volumes/kubernetes.io~configmap/conf");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("key"), vec![1u8; 64 * 1024]).unwrap();
    let empty_dir = dir.path().join("volumes/kubernetes.io~empty-dir/cache");
    std::fs::create_dir_all(&empty_dir).unwrap();
    std::fs::write(empty_dir.join("big"), vec![1u8; 1 << 20]).unwrap();
    let other = other_files(dir.path());
    assert!((72 * 1024..1 << 20).contains(&other), "emptyDirs are counted apart: {other}");
}
