//! What `/attach` attaches to: not served yet, refused with a 400 that says so.

use super::locate::Found;
use super::{Named, Refusal};
use crate::api::AppState;
use crate::api::streams::{Start, StreamOptions};

/// What attaches to the container `found`, with the streams of `options`.
pub(super) fn start(
    _state: &AppState,
    named: &Named,
    _found: &Found,
    _options: StreamOptions,
) -> Result<Start, Refusal> {
    Err(Refusal::bad_request(format!(
        "attaching to container {:?} of pod {}/{}: this agent does not serve /attach yet; use exec",
        named.container, named.namespace, named.pod
    )))
}
