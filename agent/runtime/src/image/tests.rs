use std::io::Write as _;

use super::archive::{Archive, normalize as normalize_path};
use super::layout;

#[test]
fn the_archive_finds_files_through_links_and_reads_them_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("image.tar");
    let mut builder = tar::Builder::new(std::fs::File::create(&path).unwrap());
    let data = b"layer bytes".repeat(100);
    append(&mut builder, "./aaa/layer.tar", &data);
    let mut link = tar::Header::new_gnu();
    link.set_entry_type(tar::EntryType::Symlink);
    link.set_size(0);
    builder.append_link(&mut link, "bbb/layer.tar", "../aaa/layer.tar").unwrap();
    append(&mut builder, "manifest.json", b"[]");
    builder.into_inner().unwrap().flush().unwrap();

    let archive = Archive::open(&path).unwrap();
    let span = archive.span("aaa/layer.tar").unwrap();
    assert_eq!(archive.span("bbb/layer.tar"), Some(span));
    assert_eq!(archive.span("./bbb/../aaa/layer.tar"), Some(span));
    assert!(archive.contains("manifest.json"));
    assert!(!archive.contains("index.json"));
    assert_eq!(archive.read_small(span, 1 << 20).unwrap(), data);
    assert!(archive.read_small(span, 10).is_err(), "a document over the limit is refused");
    assert_eq!(archive.sha256(span).unwrap(), layout::sha256_digest(&data));
    assert_eq!(archive.magic(span).unwrap(), b"laye");
}

#[test]
fn archive_paths_are_normalized() {
    use std::path::Path;
    assert_eq!(normalize_path(Path::new("./blobs/sha256/ab")).as_deref(), Some("blobs/sha256/ab"));
    assert_eq!(normalize_path(Path::new("/a/./b/../c")).as_deref(), Some("a/c"));
    assert_eq!(normalize_path(Path::new("../escape")), None);
    assert_eq!(normalize_path(Path::new("./")), None);
}

fn append(builder: &mut tar::Builder<std::fs::File>, name: &str, data: &[u8]) {
    let mut header = tar::Header::new_gnu();
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    builder.append_data(&mut header, name, data).unwrap();
}
