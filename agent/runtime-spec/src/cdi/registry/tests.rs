//! D3: devices resolve as the CDI library's cache resolves them: later directories win,
//! two files of one directory make a device unusable, a bad file leaves the others be,
//! and a spec's own edits come once, before its first device's.

use std::path::PathBuf;

use super::*;

/// A spec file `name` in directory `priority` of kind `vendor.com/<class>` with devices
/// `devices`, each setting `<DEVICE>=<name>`, and the spec's own `SPEC_<class>=<name>`.
fn file(priority: usize, name: &str, class: &str, devices: &[&str]) -> SpecFile {
    let devices: Vec<String> = devices
        .iter()
        .map(|d| {
            format!(
                r#"{{"name": "{d}", "containerEdits": {{"env": ["{}={name}"]}}}}"#,
                d.to_uppercase()
            )
        })
        .collect();
    let json = format!(
        r#"{{"cdiVersion": "0.3.0", "kind": "vendor.com/{class}", "devices": [{}],
            "containerEdits": {{"env": ["SPEC_{}={name}"]}}}}"#,
        devices.join(","),
        class.to_uppercase()
    );
    SpecFile {
        path: PathBuf::from(format!("/dir{priority}/{name}")),
        priority,
        data: json.into_bytes(),
    }
}

fn names(devices: &[&str]) -> Vec<String> {
    devices.iter().map(|d| (*d).to_owned()).collect()
}

fn env(registry: &Registry, devices: &[&str]) -> Vec<String> {
    registry.resolve(&names(devices)).unwrap().env
}

#[test]
fn d3_a_device_of_a_later_directory_wins() {
    let registry = Registry::new([
        file(0, "etc.json", "class", &["a", "b"]),
        file(1, "run.json", "class", &["b", "c"]),
    ]);
    assert_eq!(
        registry.device_names().collect::<Vec<_>>(),
        ["vendor.com/class=a", "vendor.com/class=b", "vendor.com/class=c"]
    );
    assert_eq!(env(&registry, &["vendor.com/class=a"]), ["SPEC_CLASS=etc.json", "A=etc.json"]);
    assert_eq!(env(&registry, &["vendor.com/class=b"]), ["SPEC_CLASS=run.json", "B=run.json"]);
    assert!(registry.errors().is_empty());
    // Whatever the order the files come in.
    let reversed =
        Registry::new([file(1, "run.json", "class", &["b"]), file(0, "etc.json", "class", &["b"])]);
    assert_eq!(env(&reversed, &["vendor.com/class=b"]), ["SPEC_CLASS=run.json", "B=run.json"]);
}

#[test]
fn d3_two_files_of_one_directory_make_a_device_unusable() {
    let registry = Registry::new([
        file(0, "a.json", "class", &["x", "y"]),
        file(0, "b.json", "class", &["x"]),
    ]);
    assert_eq!(registry.device_names().collect::<Vec<_>>(), ["vendor.com/class=y"]);
    assert_eq!(
        registry.resolve(&names(&["vendor.com/class=x"])).unwrap_err().to_string(),
        "unresolvable CDI devices vendor.com/class=x"
    );
    assert_eq!(
        registry.errors()[0].to_string(),
        r#"conflicting device "vendor.com/class=x" (specs "/dir0/b.json", "/dir0/a.json")"#
    );
    // Even when a later directory defines it as well (the library drops every conflict
    // at the end).
    let overridden = Registry::new([
        file(0, "a.json", "class", &["x"]),
        file(0, "b.json", "class", &["x"]),
        file(1, "c.json", "class", &["x"]),
    ]);
    assert_eq!(overridden.device_names().count(), 0);
    // A conflict in the later directory too.
    let later = Registry::new([
        file(0, "a.json", "class", &["x"]),
        file(1, "b.json", "class", &["x"]),
        file(1, "c.json", "class", &["x"]),
    ]);
    assert_eq!(later.device_names().count(), 0);
    assert_eq!(later.errors().len(), 1);
}

#[test]
fn d3_a_bad_file_leaves_the_others_usable() {
    let broken =
        SpecFile { path: "/dir0/broken.yaml".into(), priority: 0, data: b"kind: [".to_vec() };
    let invalid = SpecFile {
        path: "/dir0/invalid.json".into(),
        priority: 0,
        data: br#"{"cdiVersion": "9.9.9", "kind": "vendor.com/class", "devices": []}"#.to_vec(),
    };
    let registry = Registry::new([broken, file(0, "good.json", "class", &["a"]), invalid]);
    assert_eq!(registry.device_names().collect::<Vec<_>>(), ["vendor.com/class=a"]);
    let errors: Vec<String> = registry.errors().iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 2);
    assert!(
        errors[0].starts_with(
            r#"failed to parse CDI Spec "/dir0/broken.yaml": failed to unmarshal CDI Spec: "#
        ),
        "{errors:?}"
    );
    assert_eq!(
        errors[1],
        r#"CDI Spec "/dir0/invalid.json": invalid CDI Spec: invalid version "9.9.9""#
    );
}

#[test]
fn d3_a_spec_s_own_edits_come_once_before_its_first_device_s() {
    let registry = Registry::new([
        file(0, "one.json", "one", &["a", "b"]),
        file(0, "two.json", "two", &["c"]),
    ]);
    assert_eq!(
        env(&registry, &["vendor.com/one=b", "vendor.com/two=c", "vendor.com/one=a"]),
        ["SPEC_ONE=one.json", "B=one.json", "SPEC_TWO=two.json", "C=two.json", "A=one.json"]
    );
    // A name given twice has its edits twice (containerd passes each name once).
    assert_eq!(
        env(&registry, &["vendor.com/one=a", "vendor.com/one=a"]),
        ["SPEC_ONE=one.json", "A=one.json", "A=one.json"]
    );
    assert_eq!(registry.resolve(&[]).unwrap(), ContainerEdits::default());
}

#[test]
fn d3_every_unresolved_name_is_named_and_nothing_is_resolved() {
    let registry = Registry::new([file(0, "one.json", "one", &["a"])]);
    let unresolved = registry
        .resolve(&names(&[
            "vendor.com/one=z",
            "vendor.com/one=a",
            "not-qualified",
            "vendor.com/two=a",
        ]))
        .unwrap_err();
    assert_eq!(
        unresolved,
        Unresolved(names(&["vendor.com/one=z", "not-qualified", "vendor.com/two=a"]))
    );
    assert_eq!(
        unresolved.to_string(),
        "unresolvable CDI devices vendor.com/one=z, not-qualified, vendor.com/two=a"
    );
}
