use super::*;

#[test]
fn mountinfo_lines_give_mount_point_and_type() {
    let text = "\
22 28 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid shared:10 master:3 - cgroup2 cgroup2 rw
40 28 0:40 / /mnt/with\\040space rw - ext4 /dev/sda1 rw
41 28 0:41 / /mnt/back\\134slash\\ rw - ext4 /dev/sda2 rw
garbage
42 28 0:42 / /no-type rw
";
    let mounts = parse_mountinfo(text);
    let got: Vec<(&str, &str)> = mounts
        .iter()
        .map(|m| (m.mount_point.to_str().unwrap_or_default(), m.fstype.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("/sys", "sysfs"),
            ("/sys/fs/cgroup/unified", "cgroup2"),
            ("/mnt/with space", "ext4"),
            ("/mnt/back\\slash\\", "ext4"),
        ]
    );
}

#[test]
fn mountinfo_optional_fields_give_the_propagation() {
    let text = "\
1 0 0:1 / / rw shared:1 - ext4 /dev/vda1 rw
2 1 0:2 / /run rw,nosuid shared:5 master:1 - tmpfs tmpfs rw
3 1 0:3 / /var/lib/x rw master:1 - ext4 /dev/vda1 rw
4 1 0:4 / /private rw - tmpfs tmpfs rw
";
    let got: Vec<(String, bool, bool)> = parse_mountinfo(text)
        .into_iter()
        .map(|m| (m.mount_point.display().to_string(), m.shared, m.slave))
        .collect();
    let want = [("/", true, false), ("/run", true, true), ("/var/lib/x", false, true)];
    let mut want: Vec<(String, bool, bool)> =
        want.iter().map(|(p, sh, sl)| ((*p).to_owned(), *sh, *sl)).collect();
    want.push(("/private".to_owned(), false, false));
    assert_eq!(got, want);
}

#[test]
fn a_zombie_is_not_alive() {
    assert!(running_state("42 (sh) S 1 42 42 0"));
    assert!(running_state("42 (a) (b)) R 1"));
    assert!(!running_state("42 (sh) Z 1 42"));
    assert!(!running_state("42 (sh) X 1"));
    assert!(!running_state(""));
}

#[test]
fn this_process_is_readable() {
    assert!(alive(i32::try_from(std::process::id()).unwrap_or(i32::MAX)));
    assert!(own_status().is_ok_and(|s| s.contains("Threads:")));
    assert!(own_open_fds().is_ok_and(|n| n >= 1));
    assert!(mounts().is_ok_and(|m| m.iter().any(|m| m.mount_point == Path::new("/"))));
    assert_eq!(comm(0), None);
}

#[test]
fn unescapes_mountinfo_paths() {
    assert_eq!(unescape("/var/lib/outpost"), "/var/lib/outpost");
    assert_eq!(unescape("/tmp/a\\040b"), "/tmp/a b");
    assert_eq!(unescape("/tmp/tab\\011x\\134y"), "/tmp/tab\tx\\y");
    assert_eq!(unescape("/tmp/not\\99escape\\"), "/tmp/not\\99escape\\");
}
