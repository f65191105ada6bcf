use super::write;
use crate::apiserver::CallError;

#[test]
fn only_server_trouble_is_retried_and_refusals_for_load_are_not() {
    let status = |code| CallError::Status {
        code,
        reason: String::new(),
        message: String::new(),
        retry_after: None,
    };
    assert!(!write::retriable(&status(429)), "refused for load: dropped");
    assert!(write::retriable(&status(503)));
    assert!(!write::retriable(&status(403)), "RBAC: retrying changes nothing");
    assert!(!write::retriable(&status(422)));
    assert!(write::retriable(&CallError::Body("cut".into())));
}
