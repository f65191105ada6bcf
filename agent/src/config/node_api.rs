//! The node API's authentication and authorization settings (N1): KubeletConfiguration's
//! `authentication` and `authorization` blocks (the file), kubelet's flags for the same
//! (`--authentication-token-webhook`, `--authentication-token-webhook-cache-ttl`,
//! `--anonymous-auth`, `--authorization-mode`, `--authorization-webhook-cache-*-ttl`,
//! `--client-ca-file`), flags over the file, resolved into [`Access`].
//!
//! ```yaml
//! authentication:
//!   x509: {clientCAFile: /etc/kubernetes/pki/ca.crt}
//!   webhook: {enabled: true, cacheTTL: 2m}
//!   anonymous: {enabled: false}
//! authorization:
//!   mode: Webhook                # or AlwaysAllow
//!   webhook: {cacheAuthorizedTTL: 5m, cacheUnauthorizedTTL: 30s}
//! ```
//!
//! kubelet's TTL defaults (2 m, 5 m, 30 s) apply. Unlike a kubelet's config file, where
//! the webhooks default on, nothing configured keeps Outpost's earlier behaviour: no
//! TokenReview, no anonymous callers, `AlwaysAllow` (every authenticated caller may do
//! everything), so an upgrade changes nothing until the operator opts in.

use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;
use serde::Deserialize;

/// kubelet's `authentication.webhook.cacheTTL` default.
pub const DEFAULT_TOKEN_CACHE_TTL: Duration = Duration::from_secs(120);
/// kubelet's `authorization.webhook.cacheAuthorizedTTL` default.
pub const DEFAULT_AUTHORIZED_TTL: Duration = Duration::from_secs(300);
/// kubelet's `authorization.webhook.cacheUnauthorizedTTL` default.
pub const DEFAULT_UNAUTHORIZED_TTL: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "{field} {value:?}: expected a duration such as \"2m\", \"30s\" or \"0s\" (no caching)"
    )]
    Duration { field: &'static str, value: String },
    #[error(
        "{0} needs the API server: pass --kubeconfig (the agent asks the API server with its own credentials)"
    )]
    NeedsKubeconfig(&'static str),
}

/// `--authorization-mode` (`authorization.mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(try_from = "String")]
pub enum AuthorizationMode {
    // Every authenticated caller may do everything.
    #[default]
    #[value(name = "AlwaysAllow")]
    AlwaysAllow,
    // Each request is asked of the API server with a SubjectAccessReview.
    #[value(name = "Webhook")]
    Webhook,
}

impl TryFrom<String> for AuthorizationMode {
    type Error = super::values::Error;
    fn try_from(name: String) -> Result<Self, super::values::Error> {
        super::from_value_name("authorization.mode", &name)
    }
}

/// `authentication` as written in the file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AuthenticationSettings {
    pub x509: Option<X509Settings>,
    pub webhook: Option<TokenWebhookSettings>,
    pub anonymous: Option<AnonymousSettings>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct X509Settings {
    #[serde(rename = "clientCAFile")]
    pub client_ca_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TokenWebhookSettings {
    pub enabled: Option<bool>,
    #[serde(rename = "cacheTTL")]
    pub cache_ttl: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AnonymousSettings {
    pub enabled: Option<bool>,
}

/// `authorization` as written in the file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthorizationSettings {
    pub mode: Option<AuthorizationMode>,
    pub webhook: Option<AuthorizationWebhookSettings>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthorizationWebhookSettings {
    #[serde(rename = "cacheAuthorizedTTL")]
    pub cache_authorized_ttl: Option<String>,
    #[serde(rename = "cacheUnauthorizedTTL")]
    pub cache_unauthorized_ttl: Option<String>,
}

/// Who may call the node's API, resolved (besides the token file and TLS, in
/// [`super::Auth`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Access {
    /// `authentication.anonymous.enabled`: a request without credentials is
    /// `system:anonymous` (group `system:unauthenticated`) and goes on to authorization.
    pub anonymous: bool,
    /// `authentication.webhook`: bearer tokens are checked with a TokenReview, the answer
    /// kept this long (`None`: off).
    pub token_webhook: Option<Duration>,
    pub authorization: Authorization,
}

/// `authorization`, resolved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Authorization {
    #[default]
    AlwaysAllow,
    /// A SubjectAccessReview per request, an allow kept `authorized_ttl` and a denial
    /// `unauthorized_ttl`.
    Webhook { authorized_ttl: Duration, unauthorized_ttl: Duration },
}

/// What the flags give (each `None` when not given).
#[derive(Debug, Clone, Default)]
pub struct Flags {
    pub token_webhook: Option<bool>,
    pub token_webhook_cache_ttl: Option<String>,
    pub anonymous: Option<bool>,
    pub mode: Option<AuthorizationMode>,
    pub authorized_ttl: Option<String>,
    pub unauthorized_ttl: Option<String>,
}

/// The flags over the file's blocks over the defaults; the webhooks need the API server
/// (`has_kubeconfig`).
pub fn resolve(
    flags: Flags,
    authentication: Option<AuthenticationSettings>,
    authorization: Option<AuthorizationSettings>,
    has_kubeconfig: bool,
) -> Result<Access, Error> {
    let authentication = authentication.unwrap_or_default();
    let authorization = authorization.unwrap_or_default();
    let token_webhook_file = authentication.webhook.unwrap_or_default();
    let authz_webhook_file = authorization.webhook.unwrap_or_default();
    let ttl = |field, given: Option<String>, default| match given {
        None => Ok(default),
        Some(raw) => {
            outpost_core::duration::parse(&raw).ok_or(Error::Duration { field, value: raw })
        }
    };
    let token_webhook = flags.token_webhook.or(token_webhook_file.enabled).unwrap_or(false);
    let token_ttl = ttl(
        "authentication.webhook.cacheTTL",
        flags.token_webhook_cache_ttl.or(token_webhook_file.cache_ttl),
        DEFAULT_TOKEN_CACHE_TTL,
    )?;
    let authorized_ttl = ttl(
        "authorization.webhook.cacheAuthorizedTTL",
        flags.authorized_ttl.or(authz_webhook_file.cache_authorized_ttl),
        DEFAULT_AUTHORIZED_TTL,
    )?;
    let unauthorized_ttl = ttl(
        "authorization.webhook.cacheUnauthorizedTTL",
        flags.unauthorized_ttl.or(authz_webhook_file.cache_unauthorized_ttl),
        DEFAULT_UNAUTHORIZED_TTL,
    )?;
    let authorization = match flags.mode.or(authorization.mode).unwrap_or_default() {
        AuthorizationMode::AlwaysAllow => Authorization::AlwaysAllow,
        AuthorizationMode::Webhook => Authorization::Webhook { authorized_ttl, unauthorized_ttl },
    };
    if !has_kubeconfig {
        if token_webhook {
            return Err(Error::NeedsKubeconfig("--authentication-token-webhook"));
        }
        if authorization != Authorization::AlwaysAllow {
            return Err(Error::NeedsKubeconfig("--authorization-mode=Webhook"));
        }
    }
    Ok(Access {
        anonymous: flags
            .anonymous
            .or(authentication.anonymous.and_then(|a| a.enabled))
            .unwrap_or(false),
        token_webhook: token_webhook.then_some(token_ttl),
        authorization,
    })
}

#[cfg(test)]
mod tests;
