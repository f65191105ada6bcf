//! JSON read into typed objects through one deserializer, `serde_json::Value`.
//!
//! Each deserializer a type is read with is a copy of its whole decoding code in the
//! binary: the Pod's, with every type under it, is hundreds of KB. The API source reads
//! its pods through a `Value` already (S12, [`crate::source::api::strict`]), so the
//! agent's other JSON (the API client's answers, the checkpoints, the node API's answers
//! to `outpost` commands) is read the same way, and the Kubernetes types' decoding code
//! is in the binary once (the ledger, `docs/src/reference/size.md`). What it costs: the
//! `Value` tree is built before the object, and an error names the field, not the line and
//! column (these documents are machine-written).

use serde::de::DeserializeOwned;

/// `serde_json::from_slice`, through a `Value`.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    serde_json::from_value(serde_json::from_slice(bytes)?)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    #[test]
    fn an_object_and_its_errors_read_as_serde_json_reads_them() {
        let pod: Pod = super::from_slice(br#"{"metadata":{"name":"web","namespace":"default"}}"#)
            .expect("a pod");
        assert_eq!(pod.metadata.name.as_deref(), Some("web"));
        let syntax = super::from_slice::<Pod>(b"{\"metadata\":").expect_err("not JSON");
        assert!(syntax.is_eof(), "{syntax}");
        let typed = super::from_slice::<Pod>(br#"{"metadata":{"name":7}}"#).expect_err("a number");
        assert!(typed.to_string().contains("invalid type: integer `7`"), "{typed}");
    }
}
