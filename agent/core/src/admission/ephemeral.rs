//! `spec.ephemeralContainers` (X1, X2): each one is walked as a container is, after the
//! fields kube-apiserver forbids on an ephemeral container are refused in its words (a
//! static pod's manifest, or `outpost debug`, reaches the agent without that server).

use serde_json::Value;

use super::UNSUPPORTED_FIELD;
use super::review::Review;
use super::table::CONTAINER;
use crate::ephemeral::{FORBIDDEN, FORBIDDEN_FIELDS, forbidden};

pub(super) fn containers(review: &mut Review<'_>, field: &str, value: &Value) {
    for (i, item) in value.as_array().into_iter().flatten().enumerate() {
        let Value::Object(object) = item else { continue };
        let path = format!("{field}[{i}]");
        for refused in forbidden(item, &path) {
            review.refuse(
                &refused,
                UNSUPPORTED_FIELD,
                format!("{refused}: Forbidden: {FORBIDDEN}"),
            );
        }
        let mut rest = object.clone();
        rest.retain(|key, _| {
            key != "targetContainerName" && !FORBIDDEN_FIELDS.contains(&key.as_str())
        });
        review.walk(CONTAINER, "", &path, &rest);
    }
}
