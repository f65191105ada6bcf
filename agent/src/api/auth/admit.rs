//! [`Authenticator::admit`]: a request authenticated and authorized as kubelet does it
//! (N1), over Outpost's earlier rules where they still apply.
//!
//! Authentication, the first that applies:
//! 1. a client certificate the handshake verified against `--client-ca-file`: its
//!    subject's CN is the user, its O the groups;
//! 2. `Authorization: Bearer <token>`: the token of `--token-file` is the box's operator
//!    (`outpost:token-file`); any other token is reviewed with a TokenReview when
//!    `--authentication-token-webhook` is on, and refused (401) otherwise;
//! 3. no credentials: with `--anonymous-loopback-reads`, a read (or a health check) from
//!    a loopback address (Outpost's own rule, decided here, offline); with `--anonymous-auth`,
//!    `system:anonymous`; else 401 (or 403 when no way to authenticate is configured).
//!
//! Authorization: the operator of the token file may do everything, offline too. With
//! `AlwaysAllow`, every authenticated caller may do everything and an anonymous one may
//! read (kubelet would let it change state too: Outpost does not, so `--anonymous-auth`
//! alone never lets a stranger run a command). With `Webhook`, the request's kubelet
//! attributes (`nodes/<subresource>`, see [`outpost_core::node_api::attributes`]) are
//! asked of the API server with SubjectAccessReviews, `/healthz` and `/readyz` included
//! (as on kubelet's port; kubelet's unauthenticated health port is apart). A refusal is
//! kubelet's `Forbidden (user=…, verb=…, resource=nodes, subresource(s)=[…])`.

use std::sync::Arc;

use axum::http::{HeaderMap, Method as HttpMethod, StatusCode, header};
use outpost_core::node_api::{self, Decision};
use subtle::ConstantTimeEq;

use super::review::{self, TokenAnswer};
use super::user::User;
use super::{Authenticator, Caller, Class, Denied, Method, Peer, bearer, classify, digest_bytes};
use crate::api::Problem;
use crate::config::node_api::Authorization;

/// A request as the guard sees it.
#[derive(Debug, Clone, Copy)]
pub struct Incoming<'a> {
    pub method: &'a HttpMethod,
    pub path: &'a str,
    pub headers: &'a HeaderMap,
    pub peer: Option<&'a Peer>,
    /// Who the connection's verified client certificate names.
    pub certificate: Option<&'a Arc<User>>,
}

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// No or wrong credentials, as the earlier rules say it ([`Authenticator::problem`]).
    Credentials(Class, Denied),
    /// A bearer token the TokenReview refused, or that could not be reviewed (401).
    Token(String),
    /// Authenticated, not allowed (403).
    Forbidden(String),
}

impl Refused {
    pub fn problem(&self, auth: &Authenticator) -> Problem {
        match self {
            Refused::Credentials(class, denied) => auth.problem(*class, *denied),
            Refused::Token(message) => Problem::new(StatusCode::UNAUTHORIZED, message.clone()),
            Refused::Forbidden(message) => Problem::new(StatusCode::FORBIDDEN, message.clone()),
        }
    }
}

/// How a caller was identified.
enum Identity {
    User(Method, Arc<User>),
    AnonymousLoopback,
}

impl Authenticator {
    /// Decides whether `request` may go on, and as whom.
    pub async fn admit(
        &self,
        request: Incoming<'_>,
    ) -> Result<(Caller, Option<Arc<User>>), Refused> {
        let class = classify(request.method, request.path);
        let webhook = matches!(self.access.authorization, Authorization::Webhook { .. });
        if class == Class::Open && !webhook {
            return Ok((Caller::Anyone, None));
        }
        let (method, user) = match self.identify(class, request).await? {
            Identity::AnonymousLoopback => return Ok((Caller::AnonymousLoopback, None)),
            Identity::User(method, user) => (method, user),
        };
        if method == Method::Token {
            return Ok((Caller::Authenticated(method), Some(user)));
        }
        let Some(reviewer) = self.reviewer.as_ref().filter(|_| webhook) else {
            // AlwaysAllow: an anonymous caller reads, nothing more.
            return match (method, class) {
                (Method::Anonymous, Class::Write) => {
                    Err(Refused::Credentials(class, Denied::Missing))
                }
                (Method::Anonymous, _) => Ok((Caller::Anonymous, Some(user))),
                _ => Ok((Caller::Authenticated(method), Some(user))),
            };
        };
        let attributes = node_api::request_attributes(
            reviewer.node_name(),
            request.method.as_str(),
            is_upgrade(request.headers),
            request.path,
        );
        match reviewer.authorize(&user, &attributes).await {
            Ok(Decision::Allow) => Ok((Caller::Authenticated(method), Some(user))),
            Ok(Decision::Deny) => {
                Err(Refused::Forbidden(node_api::forbidden_message(&user.name, &attributes)))
            }
            Err(error) => Err(Refused::Forbidden(format!(
                "{}: {error}{}",
                node_api::forbidden_message(&user.name, &attributes),
                offline_hint(&error),
            ))),
        }
    }

    async fn identify(&self, class: Class, request: Incoming<'_>) -> Result<Identity, Refused> {
        let sent = request.headers.get(header::AUTHORIZATION);
        let has_certificate = request.peer.is_some_and(|p| p.client_cert);
        if sent.is_none() && !has_certificate {
            // Health included: under `Webhook` it is no longer open, and a local caller
            // that may read may see it.
            if self.anonymous_loopback_reads
                && matches!(class, Class::Read | Class::Open)
                && request.peer.is_some_and(Peer::is_loopback)
            {
                return Ok(Identity::AnonymousLoopback);
            }
            if self.access.anonymous {
                return Ok(Identity::User(Method::Anonymous, Arc::new(User::anonymous())));
            }
        }
        if !self.enabled() {
            return Err(Refused::Credentials(class, Denied::Off));
        }
        if self.client_certs && has_certificate {
            // A verified certificate without a readable subject is nobody in particular.
            let user = request.certificate.cloned().unwrap_or_default();
            return Ok(Identity::User(Method::ClientCert, user));
        }
        let Some(value) = sent else {
            return Err(Refused::Credentials(class, Denied::Missing));
        };
        let Some(token) = bearer(value.as_bytes()) else {
            return Err(Refused::Credentials(class, Denied::Wrong));
        };
        if self.token.is_some_and(|expected| bool::from(digest_bytes(token).ct_eq(&expected))) {
            return Ok(Identity::User(Method::Token, Arc::new(User::operator())));
        }
        let Some(reviewer) = self.reviewer.as_ref().filter(|r| r.reviews_tokens()) else {
            return Err(Refused::Credentials(class, Denied::Wrong));
        };
        match reviewer.review_token(token).await {
            Ok(TokenAnswer::Authenticated(user)) => Ok(Identity::User(Method::TokenReview, user)),
            Ok(TokenAnswer::Refused(reason)) => Err(Refused::Token(format!(
                "the bearer token is not valid: the API server's TokenReview did not authenticate it{}",
                if reason.is_empty() { String::new() } else { format!(" ({reason})") }
            ))),
            Err(error) => Err(Refused::Token(format!("{error}{}", offline_hint(&error)))),
        }
    }
}

/// What to do while the API server is unreachable.
fn offline_hint(error: &review::Error) -> &'static str {
    if review::unreachable(error) {
        "; while the API server is unreachable, on-box operators use the token of --token-file"
    } else {
        ""
    }
}

/// Whether a request asks for a protocol upgrade (WebSocket, SPDY): `Connection` names
/// `upgrade` and an `Upgrade` header says to what.
pub fn is_upgrade(headers: &HeaderMap) -> bool {
    let connection_upgrade = headers.get_all(header::CONNECTION).iter().any(|value| {
        value
            .to_str()
            .is_ok_and(|v| v.split(',').any(|token| token.trim().eq_ignore_ascii_case("upgrade")))
    });
    connection_upgrade && headers.contains_key(header::UPGRADE)
}

#[cfg(test)]
mod tests;
