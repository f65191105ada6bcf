//! Mirror pods (R1–R5, issue 5 item 4).
//! PLACEHOLDER: written by the mirror helper.

use std::sync::Arc;

use super::Context;

pub async fn run(context: Arc<Context>) {
    let _ = context;
    std::future::pending::<()>().await;
}
