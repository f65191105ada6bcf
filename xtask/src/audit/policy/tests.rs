use serde_json::json;

use super::*;

/// Metadata of a workspace member `app` with the given dependencies: `(name, version,
/// licence, kind)` where kind is `normal`, `build` or `dev`; `deep` entries hang below
/// the first dependency as its normal dependencies.
fn metadata(
    deps: &[(&str, &str, Option<&str>, &str)],
    deep: &[(&str, &str, Option<&str>)],
) -> Value {
    let id = |name: &str, version: &str| format!("registry+x#{name}@{version}");
    let mut packages = vec![json!({"id": "path+app#0.1.0", "name": "app", "version": "0.1.0",
                                   "license": "Apache-2.0"})];
    let mut app_deps = Vec::new();
    for (name, version, licence, kind) in deps {
        packages.push(json!({"id": id(name, version), "name": name, "version": version,
                             "license": licence}));
        let kind = if *kind == "normal" { Value::Null } else { json!(kind) };
        app_deps.push(json!({"pkg": id(name, version), "dep_kinds": [{"kind": kind}]}));
    }
    let mut nodes = vec![json!({"id": "path+app#0.1.0", "deps": app_deps})];
    if let Some((first, first_version, _, _)) = deps.first() {
        let mut below = Vec::new();
        for (name, version, licence) in deep {
            packages.push(json!({"id": id(name, version), "name": name, "version": version,
                                 "license": licence}));
            below.push(json!({"pkg": id(name, version), "dep_kinds": [{"kind": null}]}));
        }
        nodes.push(json!({"id": id(first, first_version), "deps": below}));
    }
    json!({"packages": packages, "workspace_members": ["path+app#0.1.0"],
           "resolve": {"nodes": nodes}})
}

fn check_app(metadata: &Value) -> Findings {
    check(metadata, &["app"])
}

#[test]
fn permissive_expressions_and_the_old_slash_form_are_allowed() {
    for licence in [
        "MIT OR Apache-2.0",
        "MIT/Apache-2.0",
        "Apache-2.0 WITH LLVM-exception OR Apache-2.0 OR MIT",
        "(MIT OR Apache-2.0) AND Unicode-3.0",
        "MIT AND BSD-3-Clause",
        "Unlicense/MIT",
        "MIT OR Apache-2.0 OR LGPL-2.1-or-later",
        "CDLA-Permissive-2.0",
    ] {
        assert_eq!(licence_problem(Some(licence)), None, "{licence}");
    }
}

#[test]
fn copyleft_missing_and_unparsable_licences_are_problems() {
    let lgpl = licence_problem(Some("LGPL-3.0")).unwrap();
    assert!(lgpl.contains("LGPL-3.0") && lgpl.contains("not in the allowed list"), "{lgpl}");
    let and = licence_problem(Some("MIT AND GPL-2.0-only")).unwrap();
    assert!(and.contains("GPL-2.0-only") && !and.contains("MIT,"), "{and}");
    assert!(licence_problem(None).unwrap().contains("no `license`"));
    assert!(licence_problem(Some("MIT OR OR")).unwrap().contains("does not parse"));
}

#[test]
fn a_shipped_copyleft_crate_fails_and_a_dev_only_exception_is_listed() {
    let shipped =
        check_app(&metadata(&[("gpl-thing", "1.0.0", Some("GPL-3.0-only"), "normal")], &[]));
    assert_eq!(shipped.licence_errors.len(), 1);
    assert!(shipped.licence_errors[0].starts_with("gpl-thing 1.0.0: "), "{shipped:?}");

    let dev =
        check_app(&metadata(&[("openmetrics-parser", "0.5.1", Some("LGPL-3.0"), "dev")], &[]));
    assert!(dev.licence_errors.is_empty(), "{dev:?}");
    assert_eq!(dev.excepted.len(), 1);
    assert!(dev.excepted[0].starts_with("openmetrics-parser 0.5.1 (LGPL-3.0): "));

    // The same exception no longer holds once a shipped binary builds it, here through
    // a normal dependency of a normal dependency.
    let reached = check_app(&metadata(
        &[("metrics", "1.0.0", Some("MIT"), "normal")],
        &[("openmetrics-parser", "0.5.1", Some("LGPL-3.0"))],
    ));
    assert_eq!(reached.licence_errors.len(), 1, "{reached:?}");
    assert!(reached.licence_errors[0].contains("one now does"));
}

#[test]
fn duplicates_are_warnings_that_say_whether_the_binaries_build_them_twice() {
    let findings = check_app(&metadata(
        &[
            ("base64", "0.22.1", Some("MIT"), "normal"),
            ("base64", "0.9.0", Some("MIT"), "build"),
            ("syn", "2.0.0", Some("MIT"), "normal"),
            ("syn", "3.0.0", Some("MIT"), "dev"),
        ],
        &[],
    ));
    assert!(findings.licence_errors.is_empty());
    assert_eq!(
        findings.duplicates,
        vec![
            Duplicate {
                name: "base64".into(),
                versions: vec!["0.9.0".into(), "0.22.1".into()],
                shipped: true
            },
            Duplicate {
                name: "syn".into(),
                versions: vec!["2.0.0".into(), "3.0.0".into()],
                shipped: false
            },
        ]
    );
    let text = describe(&findings);
    assert!(text.starts_with("audit: licences: 5 packages, 0 not allowed, 0 excepted; 2 crates"));
    assert!(text.contains("warning (duplicate): base64 0.9.0, 0.22.1 (shipped binaries)"));
    assert!(text.contains("warning (duplicate): syn 2.0.0, 3.0.0 (tests and tools only)"));
}

#[test]
fn only_the_shipped_packages_dependencies_count_as_shipped() {
    let data = metadata(&[("tokio", "1.0.0", Some("MIT"), "normal")], &[]);
    let tokio = "registry+x#tokio@1.0.0".to_owned();
    assert!(shipped(&data, &packages(&data), &["app"]).contains(&tokio));
    assert!(shipped(&data, &packages(&data), &["other"]).is_empty());
}

#[test]
fn the_allowed_list_and_the_exceptions_parse() {
    for licence in ALLOWED {
        assert!(Licensee::parse(licence).is_ok(), "{licence}");
    }
    assert!(EXCEPTIONS.iter().all(|(name, why)| !name.is_empty() && why.len() > 20));
}
