//! Bootstrap tokens and what `outpost join` checks with them (J1), as kubeadm's token
//! discovery does:
//!
//! - [`Token`]: a bootstrap token `ID.SECRET` (id `[a-z0-9]{6}`, secret `[a-z0-9]{16}`),
//!   the Secret `kube-system/bootstrap-token-<id>` on the cluster;
//! - [`Pin`]: `sha256:<hex>`, the hash of a CA certificate's DER SubjectPublicKeyInfo
//!   (`--discovery-token-ca-cert-hash`), computed from a PEM bundle by [`ca_pins`];
//! - [`jws`]: the detached JWS the bootstrap signer puts in `kube-public/cluster-info`
//!   (`jws-kubeconfig-<id>`) over its `kubeconfig`, signed with HS256 and the token's
//!   secret: [`jws::sign`] (the signer's side) and [`jws::verify`] (the joining node's).
//!
//! No IO: the agent fetches `cluster-info` and writes the files.

pub mod jws;
mod pin;
mod token;

#[cfg(test)]
mod tests;

pub use pin::{Pin, ca_pins, check_pins};
pub use token::Token;

/// The ConfigMap the cluster publishes for joining nodes (namespace [`CLUSTER_INFO_NAMESPACE`]).
pub const CLUSTER_INFO: &str = "cluster-info";
/// Where [`CLUSTER_INFO`] lives, readable without credentials.
pub const CLUSTER_INFO_NAMESPACE: &str = "kube-public";
/// The key of [`CLUSTER_INFO`] that holds the cluster's kubeconfig (server and CA).
pub const KUBECONFIG_KEY: &str = "kubeconfig";
/// The prefix of [`CLUSTER_INFO`]'s keys holding a token's signature: `jws-kubeconfig-<id>`.
pub const JWS_KEY_PREFIX: &str = "jws-kubeconfig-";
/// The Secret type of bootstrap tokens.
pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// The prefix of bootstrap tokens' Secret names (in `kube-system`): `bootstrap-token-<id>`.
pub const SECRET_PREFIX: &str = "bootstrap-token-";

/// The key of [`CLUSTER_INFO`] that carries the signature made with token `id`.
pub fn jws_key(id: &str) -> String {
    format!("{JWS_KEY_PREFIX}{id}")
}

/// What is wrong with a token, a pin or a signature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(
        "the bootstrap token is not of the form ID.SECRET (6 and 16 characters of [a-z0-9], \
         as `kubeadm token create` prints): {reason}"
    )]
    Token { reason: String },
    #[error(
        "the CA certificate hash {given:?} is not of the form sha256:<64 hex digits> \
         (as `kubeadm token create --print-join-command` prints): {reason}"
    )]
    Pin { given: String, reason: String },
    #[error("cannot read the cluster's CA certificate: {reason}")]
    Certificate { reason: String },
    #[error(
        "the cluster's CA public key hash {found} is not one of the pinned {pinned}: this is \
         not the cluster you meant, or the hash is wrong (on a control-plane node, \
         `kubeadm token create --print-join-command` prints the right one)"
    )]
    PinMismatch { found: String, pinned: String },
    #[error("the detached JWS signature is malformed: {reason}")]
    JwsMalformed { reason: String },
    #[error(
        "the JWS signature of cluster-info does not match token {id:?}: the token's secret \
         is wrong, or the server is not the cluster's; check the token (`kubeadm token list`)"
    )]
    JwsMismatch { id: String },
}
