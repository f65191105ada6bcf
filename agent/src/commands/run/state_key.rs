//! V3: the state key `outpost run` seals its checkpoint of Secrets with, and what it says
//! at start of what is protected at rest and what is not.

use std::path::PathBuf;
use std::sync::Arc;

use crate::checkpoint::seal::{self, Source, StateKey};
use crate::config::Config;

/// The checkpoint that holds the API pods' Secrets and tokens (`objects::saved`).
const SECRETS_CHECKPOINT: &str = "checkpoints/api-objects.json";

/// The key `--state-key-file` names, else the systemd credential `credentials` (the
/// unit's `$CREDENTIALS_DIRECTORY`) holds; `None` without either.
pub(super) fn load(
    config: &Config,
    credentials: Option<PathBuf>,
) -> Result<Option<Arc<StateKey>>, seal::Error> {
    let source = Source::find(config.state_key_file.clone(), credentials.as_deref());
    let key = source.map(StateKey::load).transpose()?.map(Arc::new);
    announce(config, key.as_deref());
    Ok(key)
}

/// Logs what is sealed at rest and what has its file mode (0600) as its only guard. Only
/// a node with a kubeconfig keeps Secrets or credentials.
fn announce(config: &Config, key: Option<&StateKey>) {
    if config.kubeconfig.is_none() {
        return;
    }
    let secrets = config.node.state_dir.join(SECRETS_CHECKPOINT);
    // kubelet's layout, which the kubeconfigs name: other tools read these files.
    let credentials = config.certificates.bootstrap_kubeconfig.as_ref().map(|bootstrap| {
        let pki = config.node.state_dir.join("pki");
        format!(
            "{} (the client certificate's key), {} (the bootstrap token)",
            pki.display(),
            bootstrap.display()
        )
    });
    match key {
        Some(key) => {
            tracing::info!(
                key = key.id(),
                from = %key.source(),
                cipher = seal::CIPHER,
                "the API pods' Secrets and service account tokens are sealed at rest in {}",
                secrets.display()
            );
            if let Some(credentials) = credentials {
                tracing::info!(
                    "kept in kubelet's layout, not sealed (file mode 0600): {credentials}"
                );
            }
        }
        None => tracing::warn!(
            "no state key (neither the systemd credential {} nor --state-key-file): not \
             encrypted at rest, guarded by file mode 0600 only: {} (the API pods' Secrets and \
             service account tokens){}",
            seal::CREDENTIAL,
            secrets.display(),
            credentials.map(|c| format!(", {c}")).unwrap_or_default()
        ),
    }
}
