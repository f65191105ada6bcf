use super::*;

const PASSWD: &str = "\
# comment
root:x:0:0:root:/root:/bin/sh

app:x:1000:1001:App:/home/app:/bin/sh
broken:x:notanumber:1
short:x:5
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
";

const GROUP: &str = "\
root:x:0:
app:x:1001:app
audio:x:63:app,other
video:x:44: other , app
wheel:x:10:root
empty:x:12
bad:x:nope:app
";

#[test]
fn passwd_lines_that_parse() {
    let entries = parse_passwd(PASSWD);
    let names: Vec<_> = entries.iter().map(|e| (e.name.as_str(), e.uid, e.gid)).collect();
    assert_eq!(names, [("root", 0, 0), ("app", 1000, 1001), ("nobody", 65534, 65534)]);
}

#[test]
fn group_lines_that_parse() {
    let groups = parse_group(GROUP);
    let video = groups.iter().find(|g| g.name == "video").unwrap();
    assert_eq!(
        (video.gid, video.members.clone()),
        (44, vec!["other".to_owned(), "app".to_owned()])
    );
    let empty = groups.iter().find(|g| g.name == "empty").unwrap();
    assert!(empty.members.is_empty(), "a line without the member field has no members");
    assert!(groups.iter().all(|g| g.name != "bad"));
}

#[test]
fn image_user_part_as_kubelet_reads_it() {
    assert_eq!(UserRef::of_image(""), UserRef::Id(0));
    assert_eq!(UserRef::of_image("7"), UserRef::Id(7));
    assert_eq!(UserRef::of_image("7:8"), UserRef::Id(7), "kubelet drops the group part");
    assert_eq!(UserRef::of_image("app"), UserRef::Name("app".to_owned()));
    assert_eq!(UserRef::of_image("app:staff"), UserRef::Name("app".to_owned()));
}

fn resolved(uid: u32, gid: u32, groups: &[u32]) -> Result<Resolved, Unresolved> {
    Ok(Resolved { uid, gid, groups: groups.to_vec() })
}

#[test]
fn a_name_takes_uid_gid_and_groups_from_the_files() {
    let name = UserRef::Name("app".to_owned());
    assert_eq!(resolve(&name, None, Some(PASSWD), Some(GROUP)), resolved(1000, 1001, &[63, 44]));
    assert_eq!(resolve(&name, Some(5), Some(PASSWD), Some(GROUP)), resolved(1000, 5, &[63, 44]));
    assert_eq!(resolve(&name, None, Some(PASSWD), None), resolved(1000, 1001, &[]));
}

#[test]
fn a_name_not_in_passwd_is_an_error() {
    let ghost = UserRef::Name("ghost".to_owned());
    assert_eq!(
        resolve(&ghost, None, Some(PASSWD), Some(GROUP)),
        Err(Unresolved::UnknownUser("ghost".to_owned()))
    );
    assert_eq!(resolve(&ghost, Some(1), None, None), Err(Unresolved::NoPasswd("ghost".to_owned())));
}

#[test]
fn a_uid_takes_its_gid_from_passwd_when_listed() {
    assert_eq!(
        resolve(&UserRef::Id(1000), None, Some(PASSWD), Some(GROUP)),
        resolved(1000, 1001, &[63, 44])
    );
    assert_eq!(resolve(&UserRef::Id(1000), Some(9), Some(PASSWD), None), resolved(1000, 9, &[]));
    assert_eq!(
        resolve(&UserRef::Id(4242), None, Some(PASSWD), Some(GROUP)),
        resolved(4242, 0, &[])
    );
    assert_eq!(resolve(&UserRef::Id(1000), None, None, Some(GROUP)), resolved(1000, 0, &[]));
}

#[test]
fn root_gets_the_groups_that_list_it() {
    assert_eq!(resolve(&UserRef::Id(0), None, Some(PASSWD), Some(GROUP)), resolved(0, 0, &[10]));
    assert_eq!(resolve(&UserRef::Id(0), None, None, None), resolved(0, 0, &[]));
}
