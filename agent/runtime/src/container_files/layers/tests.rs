use std::collections::HashMap;
use std::os::unix::fs::symlink;

use super::*;

fn mount(kind: &str, source: &str, options: &[&str]) -> Mount {
    Mount {
        r#type: kind.to_owned(),
        source: source.to_owned(),
        target: String::new(),
        options: options.iter().map(|o| (*o).to_owned()).collect(),
    }
}

#[test]
fn layer_dirs_of_overlay_and_bind_mounts() {
    let single = [mount("bind", "/s/1/fs", &["ro", "rbind"])];
    assert_eq!(dirs(&single).unwrap(), [PathBuf::from("/s/1/fs")]);
    let view = [mount("overlay", "overlay", &["ro", "lowerdir=/s/3/fs:/s/2/fs:/s/1/fs"])];
    assert_eq!(dirs(&view).unwrap(), ["/s/3/fs", "/s/2/fs", "/s/1/fs"].map(PathBuf::from));
    let active = [mount(
        "overlay",
        "overlay",
        &["workdir=/s/4/work", "upperdir=/s/4/fs", "lowerdir=/s/1/fs"],
    )];
    assert_eq!(dirs(&active).unwrap(), ["/s/4/fs", "/s/1/fs"].map(PathBuf::from));
    assert!(matches!(
        dirs(&[mount("zfs", "pool/x", &[])]).unwrap_err(),
        Error::MountType(kind) if kind == "zfs"
    ));
}

/// Layers described as path → entry, for [`find`].
fn lookup<'a>(layers: &'a HashMap<&str, Entry>) -> impl Fn(&Path) -> io::Result<Entry> + 'a {
    |path| Ok(layers.get(path.to_str().unwrap()).copied().unwrap_or(Entry::Absent))
}

fn layer_dirs() -> Vec<PathBuf> {
    ["/top", "/middle", "/bottom"].map(PathBuf::from).to_vec()
}

const DIR: Entry = Entry::Dir { opaque: false };

#[test]
fn the_top_most_layer_with_the_file_wins() {
    let layers = HashMap::from([
        ("/top/etc", DIR),
        ("/middle/etc", DIR),
        ("/middle/etc/passwd", Entry::File),
        ("/bottom/etc", DIR),
        ("/bottom/etc/passwd", Entry::File),
    ]);
    let found = find(&layer_dirs(), Path::new("etc/passwd"), lookup(&layers)).unwrap();
    assert_eq!(found, Some(PathBuf::from("/middle/etc/passwd")));
}

#[test]
fn whiteouts_and_opaque_directories_hide_lower_layers() {
    let deleted = HashMap::from([
        ("/top/etc", DIR),
        ("/top/etc/passwd", Entry::Whiteout),
        ("/bottom/etc", DIR),
        ("/bottom/etc/passwd", Entry::File),
    ]);
    assert_eq!(find(&layer_dirs(), Path::new("etc/passwd"), lookup(&deleted)).unwrap(), None);
    let replaced = HashMap::from([
        ("/middle/etc", Entry::Dir { opaque: true }),
        ("/bottom/etc", DIR),
        ("/bottom/etc/passwd", Entry::File),
    ]);
    assert_eq!(find(&layer_dirs(), Path::new("etc/passwd"), lookup(&replaced)).unwrap(), None);
    let dir_deleted =
        HashMap::from([("/top/etc", Entry::Whiteout), ("/bottom/etc/passwd", Entry::File)]);
    assert_eq!(find(&layer_dirs(), Path::new("etc/passwd"), lookup(&dir_deleted)).unwrap(), None);
}

#[test]
fn not_a_file_is_none_and_a_symlink_is_an_error() {
    let dir = HashMap::from([("/top/etc", DIR), ("/top/etc/passwd", DIR)]);
    assert_eq!(find(&layer_dirs(), Path::new("etc/passwd"), lookup(&dir)).unwrap(), None);
    let linked = HashMap::from([("/top/etc", Entry::Symlink)]);
    let error = find(&layer_dirs(), Path::new("etc/passwd"), lookup(&linked)).unwrap_err();
    assert!(error.to_string().starts_with("/etc is a symbolic link"), "{error}");
}

#[test]
fn reads_from_real_layer_directories() {
    let scratch = tempfile::tempdir().unwrap();
    let top = scratch.path().join("top");
    let bottom = scratch.path().join("bottom");
    fs::create_dir_all(top.join("etc")).unwrap();
    fs::create_dir_all(bottom.join("etc")).unwrap();
    fs::write(bottom.join("etc/passwd"), "root:x:0:0::/root:/bin/sh\n").unwrap();
    fs::write(top.join("etc/group"), "root:x:0:\n").unwrap();
    let layers = [top.clone(), bottom];
    assert_eq!(
        read(&layers, "etc/passwd", 100).unwrap().as_deref(),
        Some("root:x:0:0::/root:/bin/sh\n")
    );
    assert_eq!(read(&layers, "etc/group", 100).unwrap().as_deref(), Some("root:x:0:\n"));
    assert_eq!(read(&layers, "etc/shadow", 100).unwrap(), None);
    assert!(matches!(read(&layers, "etc/passwd", 4), Err(Error::Io { .. })), "over the limit");
    symlink("/etc/passwd", top.join("etc/passwd")).unwrap();
    assert!(matches!(read(&layers, "etc/passwd", 100), Err(Error::Symlink { .. })));
}
