use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::yaml;

/// Strings that YAML 1.1 or 1.2 would read as another type, a multi-line one and a long
/// one: `-o yaml` writes them so that they read back as the same strings.
#[test]
fn yaml_keeps_strings_that_look_like_other_types() {
    let tricky = [
        "1",
        "1.0",
        "0755",
        "0x1F",
        "1e3",
        "1_000",
        "12:30",
        "true",
        "yes",
        "No",
        "on",
        "y",
        "null",
        "~",
        "",
        "2024-01-02",
        "2024-01-02T03:04:05Z",
        ".inf",
        "-",
        "#x",
        "a: b",
        "- a",
        "'q'",
        "\"q\"",
        " lead",
        "trail ",
        "line 1\nline 2\n",
    ];
    let long = "word ".repeat(30);
    let env = tricky
        .iter()
        .copied()
        .chain([long.as_str()])
        .enumerate()
        .map(|(i, value)| EnvVar {
            name: format!("V{i}"),
            value: Some(value.to_owned()),
            ..EnvVar::default()
        })
        .collect();
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("web".to_owned()),
            labels: Some(
                tricky
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (format!("k{i}"), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".to_owned(),
                image: Some("nginx:1".to_owned()),
                env: Some(env),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    };
    let list = k8s_openapi::List { items: vec![pod], ..k8s_openapi::List::default() };
    let text = yaml(&list).unwrap();
    let read: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(read, serde_json::to_value(&list).unwrap(), "{text}");
    for plain in ["value: 1.0\n", "value: yes\n", "value: on\n", "value: 0755\n", "value: y\n"] {
        assert!(!text.contains(plain), "{plain:?} in:\n{text}");
    }
}
