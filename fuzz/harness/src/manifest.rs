//! `manifest`: a static pod manifest's bytes, as a file, the manifest URL or a push
//! delivers them, through decoding, defaulting, validation and admission
//! ([`outpost_core::manifest::decode_with_warnings`]).

use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use outpost_core::manifest::{self, Decoded, Errors, Origin};
use outpost_core::pod::{self, CONFIG_HASH, CONFIG_SOURCE};

const NODE_NAME: &str = "fuzz-node";

/// Decodes `data` from each origin (admission differs by source) and checks what comes
/// out: pods that are named, placed and stamped as defaulting says, errors with
/// positions inside the text, and the same answer on a second decode.
pub fn manifest(data: &[u8]) {
    let origins = [
        Origin::File(Path::new("/etc/outpost/manifests/fuzz.yaml")),
        Origin::Url("http://127.0.0.1:8080/fuzz.yaml"),
        Origin::Push("fuzz"),
    ];
    for origin in origins {
        let decoded = manifest::decode_with_warnings(data, origin, NODE_NAME);
        match &decoded {
            Ok(Decoded { pods, warnings }) => {
                for pod in pods {
                    check_pod(pod, origin);
                }
                for warning in warnings {
                    check_position(data, warning.position, &warning.to_string());
                }
            }
            Err(errors) => check_errors(data, errors),
        }
        let again = manifest::decode(data, origin, NODE_NAME);
        match (&decoded, &again) {
            (Ok(first), Ok(second)) => {
                assert!(first.pods == *second, "decoding is not deterministic")
            }
            (Err(first), Err(second)) => {
                assert_eq!(first.to_string(), second.to_string(), "errors differ between decodes")
            }
            _ => panic!("one decode accepted the manifest and the other refused it"),
        }
    }
}

/// S1–S7: the node name appended, a namespace, a UID that is also the config hash, and
/// the source stamped.
fn check_pod(pod: &Pod, origin: Origin<'_>) {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    assert!(name.ends_with(&format!("-{NODE_NAME}")), "pod name {name:?} lacks the node name");
    assert!(pod.metadata.namespace.as_deref().is_some_and(|ns| !ns.is_empty()), "no namespace");
    let uid = pod::uid(pod);
    assert!(!uid.is_empty(), "pod {name:?} has no UID");
    let annotations = pod.metadata.annotations.as_ref();
    let annotation = |key: &str| annotations.and_then(|a| a.get(key)).map(String::as_str);
    assert_eq!(annotation(CONFIG_HASH), Some(uid), "config.hash is not the UID");
    assert_eq!(annotation(CONFIG_SOURCE), Some(origin.source().config_source()));
}

fn check_errors(data: &[u8], errors: &Errors) {
    assert!(!errors.0.is_empty(), "a refused manifest with no error");
    for error in &errors.0 {
        let text = error.to_string();
        assert!(!text.is_empty(), "an empty error message");
        check_position(data, error.position(), &text);
    }
}

/// A 1-based line and column inside the text (the column counted in characters, at most
/// one past a line's end). YAML also breaks lines at a lone `\r`, and libyaml's positions
/// count them: a line is at most one past every `\n` and `\r`.
fn check_position(data: &[u8], position: Option<(usize, usize)>, what: &str) {
    let Some((line, column)) = position else { return };
    let lines = data.split(|&b| b == b'\n').count() + data.iter().filter(|&&b| b == b'\r').count();
    assert!(line >= 1 && line <= lines, "{what}: line {line} outside 1..={lines}");
    let longest = data.split(|&b| b == b'\n').map(<[u8]>::len).max().unwrap_or(0);
    assert!(column >= 1 && column <= longest + 1, "{what}: column {column} past every line");
}
