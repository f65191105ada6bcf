//! The node Lease in `kube-node-lease` (issue 5, item 2).
//! PLACEHOLDER: written by the node helper.

use std::sync::Arc;

use super::Context;

pub async fn run(context: Arc<Context>) {
    let _ = context;
    std::future::pending::<()>().await;
}
