//! Waiting for the signals that stop the agent.

use tokio::signal::unix::{SignalKind, signal as unix_signal};

/// Resolves on SIGINT or SIGTERM with the signal's name. If a handler cannot be
/// installed, that signal is simply not waited for.
pub async fn signal() -> &'static str {
    let term = unix_signal(SignalKind::terminate());
    let int = unix_signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut term), Ok(mut int)) => tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        },
        (Ok(mut term), Err(_)) => {
            term.recv().await;
            "SIGTERM"
        }
        (Err(_), Ok(mut int)) => {
            int.recv().await;
            "SIGINT"
        }
        (Err(_), Err(_)) => std::future::pending().await,
    }
}
