use proptest::prelude::*;
use serde_json::json;

use super::*;

fn configured(name: &str) -> bool {
    matches!(name, "nvidia" | "crun")
}

#[test]
fn d5_a_pod_without_a_class_has_none() {
    let pod = |spec: serde_json::Value| -> Pod {
        serde_json::from_value(json!({ "metadata": { "name": "p" }, "spec": spec })).unwrap()
    };
    assert_eq!(class_name(&pod(json!({ "containers": [] }))), None);
    assert_eq!(class_name(&pod(json!({ "containers": [], "runtimeClassName": "" }))), None);
    let nvidia = pod(json!({ "containers": [], "runtimeClassName": "nvidia" }));
    assert_eq!(class_name(&nvidia), Some("nvidia"));
}

#[test]
fn d5_a_static_pods_class_is_a_handler_of_the_node() {
    assert_eq!(handler("nvidia", Class::Handler, configured), Ok(Some("nvidia")));
    assert_eq!(handler("runc", Class::Handler, configured), Ok(None), "the default handler");
    assert_eq!(
        handler("kata", Class::Handler, configured).unwrap_err().to_string(),
        "rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for \"kata\" is configured"
    );
}

#[test]
fn d5_an_api_pods_class_is_its_runtimeclass_objects_handler() {
    let found = |handler| Class::Object(Lookup::Found(handler));
    assert_eq!(handler("gpu", found("nvidia"), configured), Ok(Some("nvidia")));
    assert_eq!(handler("plain", found("runc"), configured), Ok(None));
    assert_eq!(
        handler("sandboxed", found("kata"), configured),
        Err(Error::NoRuntime("kata".into())),
        "a class whose handler the node lacks"
    );
}

#[test]
fn d5_an_unknown_class_gets_kubelets_error() {
    let absent = handler("gpu", Class::Object(Lookup::Absent), configured).unwrap_err();
    assert_eq!(absent.to_string(), "runtimeclass.node.k8s.io \"gpu\" not found");
    let why = "the API server is unreachable and the object is not cached";
    let unknown = handler("gpu", Class::Object(Lookup::Unavailable(why)), configured);
    assert_eq!(
        unknown.unwrap_err().to_string(),
        format!("failed to lookup RuntimeClass gpu: {why}")
    );
}

proptest! {
    /// D5: a handler is chosen only when the node has it, the default is never one of the
    /// configured, and a static pod's class is its handler.
    #[test]
    fn d5_a_chosen_handler_is_configured(class in "[a-z]{1,6}", known in "[a-z]{1,6}") {
        let has = |name: &str| name == known;
        match handler(&class, Class::Handler, has) {
            Ok(Some(chosen)) => {
                prop_assert_eq!(chosen, class.as_str());
                prop_assert!(has(chosen) && chosen != DEFAULT_HANDLER);
            }
            Ok(None) => prop_assert_eq!(class.as_str(), DEFAULT_HANDLER),
            Err(error) => prop_assert_eq!(error, Error::NoRuntime(class.clone())),
        }
    }
}
