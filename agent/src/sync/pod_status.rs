//! The pod status manager (issue 5, item 3).
//! PLACEHOLDER: written by the status helper.

use std::sync::Arc;

use super::Context;

pub async fn run(context: Arc<Context>) {
    let _ = context;
    std::future::pending::<()>().await;
}
