//! Nodes to typed values: Go's JSON rules, paths and positions of errors, unknown keys.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::super::yaml::load;
use super::decode;

#[derive(Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Probe {
    period_seconds: Option<i32>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    items: Option<Vec<Item>>,
}

#[derive(Debug, Deserialize, PartialEq)]
struct Item {
    name: String,
}

#[test]
fn unknown_keys_of_structs_are_collected_with_paths_and_suggestions() {
    let root = load("periodSecondz: 3\nlabels: {free: form}\nitems:\n- {name: a, nmae: b}\n")
        .unwrap()
        .remove(0);
    let (probe, unknown) = decode::<Probe>(&root, "");
    let probe = probe.unwrap();
    assert_eq!(probe.period_seconds, None);
    let found: Vec<_> = unknown.iter().map(|u| (u.field.as_str(), u.at, u.suggestion)).collect();
    assert_eq!(
        found,
        [
            ("periodSecondz", (1, 1), Some("periodSeconds")),
            ("items[0].nmae", (4, 13), Some("name"))
        ]
    );
}

#[test]
fn a_type_error_names_its_path_and_points_at_its_node() {
    let root = load("items:\n- name: a\n- name: 7\n").unwrap().remove(0);
    let (probe, _) = decode::<Probe>(&root, "items[3]");
    let error = probe.unwrap_err();
    assert_eq!(error.located.as_ref().map(|(_, at)| *at), Some((3, 9)));
    assert_eq!(
        error.to_string(),
        "items[3].items[1].name: invalid type: integer `7`, expected a string"
    );
}

#[test]
fn a_missing_field_points_at_its_mapping() {
    let root = load("items:\n- {}\n").unwrap().remove(0);
    let (probe, _) = decode::<Probe>(&root, "");
    let error = probe.unwrap_err();
    assert_eq!(error.located, Some(("items[0]".to_owned(), (2, 3))));
    assert!(error.to_string().contains("missing field `name`"), "{error}");
}

#[test]
fn non_finite_floats_are_not_json_numbers() {
    let root = load("periodSeconds: .inf\n").unwrap().remove(0);
    let (probe, _) = decode::<Probe>(&root, "");
    assert!(probe.unwrap_err().to_string().contains("not a JSON number"));
}
