//! `outpost join` (J1): join a cluster with a bootstrap token, as `kubeadm join` does
//! with token discovery.
//!
//! 1. Read `kube-public/cluster-info` from `--server` without trusting its TLS
//!    certificate yet ([`discovery`]);
//! 2. check the ConfigMap's `jws-kubeconfig-<id>` signature of its `kubeconfig` with the
//!    token;
//! 3. check that the CA in that kubeconfig has a public key pinned with
//!    `--discovery-token-ca-cert-hash`;
//! 4. read `cluster-info` again over TLS verified with that CA, and check it is the same;
//! 5. write the bootstrap kubeconfig (the cluster's server and CA, the token as user) and
//!    the agent's config (`kubeconfig`, `bootstrapKubeconfig`, `nodeName`), so that
//!    `outpost run` gets its client certificate by TLS bootstrapping ([`files`]).
//!
//! A wrong signature or hash stops the join at once; an unreachable server, a missing
//! `cluster-info` or a missing signature (the bootstrap signer may not have run yet) is
//! tried again until `--discovery-timeout`.

mod discovery;
mod files;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use outpost_core::bootstrap_token;

use crate::cli::JoinArgs;

pub use discovery::Discovered;
pub use files::{BOOTSTRAP_KUBECONFIG, KUBECONFIG};

/// Why a join stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("--server {server:?} is not an https URL: {reason}")]
    Server { server: String, reason: String },
    #[error("--discovery-timeout {0:?} is not a duration (e.g. 5m, 30s)")]
    Timeout(String),
    #[error("cannot read cluster-info from {url}: {reason}")]
    Fetch { url: String, reason: String },
    #[error(
        "cluster-info from {url} has no signature for token id {id:?} (no key jws-kubeconfig-{id}): \
         the token does not exist, has expired or may not sign (usage-bootstrap-signing); make a \
         new one with `kubeadm token create`"
    )]
    NoSignature { url: String, id: String },
    #[error("cannot trust cluster-info from {url}")]
    Verify {
        url: String,
        #[source]
        source: bootstrap_token::Error,
    },
    #[error("cluster-info from {url} is not usable: {reason}")]
    ClusterInfo { url: String, reason: String },
    #[error(
        "cluster-info read over TLS verified with the cluster's CA differs from the one read \
         before: it changed meanwhile, or something between this node and {url} altered it; \
         try again"
    )]
    Changed { url: String },
    #[error("gave up reading cluster-info after {waited:.0?} (--discovery-timeout)")]
    GaveUp {
        waited: Duration,
        #[source]
        last: Box<Error>,
    },
    #[error(
        "this node has joined already: {0} exists; remove it (and the client certificates under \
         the state directory) to join again"
    )]
    Joined(PathBuf),
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the agent config {path}")]
    ReadConfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the join's runtime")]
    Runtime(#[source] std::io::Error),
    #[error("cannot read the bootstrap token file {path}")]
    ReadToken {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the bootstrap token file {path} may be read by others (mode {mode:o}): a token lets \
         anyone join this cluster as a node; `chmod 600` it"
    )]
    TokenFileMode { path: PathBuf, mode: u32 },
    #[error("the bootstrap token file {path} does not hold a token")]
    TokenFile {
        path: PathBuf,
        #[source]
        source: bootstrap_token::Error,
    },
    #[error("give the bootstrap token with --token or --token-file")]
    NoToken,
}

impl Error {
    /// Whether trying again may help (the server, or its signer, is not there yet).
    fn is_transient(&self) -> bool {
        matches!(self, Error::Fetch { .. } | Error::NoSignature { .. })
    }
}

/// `outpost join`: discovery, then the files; prints what it checked and wrote.
pub fn join(args: &JoinArgs) -> Result<ExitCode, Error> {
    let timeout = outpost_core::duration::positive(&args.discovery_timeout)
        .ok_or_else(|| Error::Timeout(args.discovery_timeout.clone()))?;
    let layout = files::Layout::new(&args.config, args.kubeconfig_dir.as_deref());
    layout.check_not_joined()?;
    let token = token(args)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    let started = Instant::now();
    let info = runtime.block_on(discovery::discover(
        &args.server,
        &token,
        &args.ca_cert_hashes,
        timeout,
    ))?;
    println!(
        "cluster-info of {} verified: signed with token {}, CA public key {} pinned",
        info.server,
        token.id(),
        info.pin
    );
    let written = layout.write(&info, &token, args.node_name.as_deref())?;
    for path in &written {
        println!("wrote {}", path.display());
    }
    println!(
        "joined in {:.2?}; start (or restart) the agent with --config {}: it asks the cluster \
         for its client certificate (TLS bootstrapping)",
        started.elapsed(),
        args.config.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The token of `--token`, or read from `--token-file` (owner-only, like the kubeconfig
/// the join writes with it).
fn token(args: &JoinArgs) -> Result<bootstrap_token::Token, Error> {
    use std::os::unix::fs::PermissionsExt as _;
    if let Some(token) = &args.token {
        return Ok(token.clone());
    }
    let path = args.token_file.as_ref().ok_or(Error::NoToken)?;
    let read = |source| Error::ReadToken { path: path.clone(), source };
    let mode = std::fs::metadata(path).map_err(read)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(Error::TokenFileMode { path: path.clone(), mode });
    }
    let text = std::fs::read_to_string(path).map_err(read)?;
    text.trim().parse().map_err(|source| Error::TokenFile { path: path.clone(), source })
}
