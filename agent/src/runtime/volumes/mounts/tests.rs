use super::*;

#[test]
fn unescapes_mountinfo_paths() {
    assert_eq!(unescape("/var/lib/outpost"), "/var/lib/outpost");
    assert_eq!(unescape("/tmp/a\\040b"), "/tmp/a b");
    assert_eq!(unescape("/tmp/tab\\011x\\134y"), "/tmp/tab\tx\\y");
    assert_eq!(unescape("/tmp/not\\99escape\\"), "/tmp/not\\99escape\\");
}
