//! Service-account tokens for projected volumes, as kubelet's token manager gets them: a
//! TokenRequest for the pod's service account, bound to the pod, for the source's
//! audience and lifetime; kept per pod and source, and requested again once 80 % of its
//! lifetime has passed or it is 24 hours old, whichever comes first. A refresh that
//! fails keeps the old token (offline, it is all there is) and is tried again later.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use outpost_core::pod;
use serde::{Deserialize, Serialize};

use super::{Inner, lock};
use crate::apiserver::server_time;
use crate::runtime::spec::projection::{Object, Reference, Resolution};

/// A token is refreshed at the latest this long after it was issued.
const MAX_AGE: Duration = Duration::from_secs(24 * 60 * 60);
/// A failed refresh is tried again after this long.
const RETRY: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("the TokenRequest failed")]
    Request(#[source] kube::Error),
    #[error("the API server answered the TokenRequest without a token or its expiry")]
    NoToken,
}

/// Which token: the pod's, for one projected source.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TokenKey {
    pub(super) uid: String,
    pub(super) service_account: String,
    pub(super) audience: String,
    pub(super) expiration_seconds: i64,
}

/// A token and its lifetime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Token {
    pub(super) token: Arc<str>,
    pub(super) issued: Timestamp,
    pub(super) expires: Timestamp,
}

impl Token {
    /// When it must be requested again: at 80 % of its lifetime, or at 24 hours.
    pub(super) fn refresh_at(&self) -> Timestamp {
        let lifetime = self.expires.duration_since(self.issued).max(SignedDuration::ZERO);
        let at_80 = lifetime.checked_mul(4).map_or(lifetime, |d| d / 5);
        let max_age = SignedDuration::try_from(MAX_AGE).unwrap_or(SignedDuration::MAX);
        self.issued.saturating_add(at_80.min(max_age)).unwrap_or(self.expires)
    }
}

/// The token `reference` names, for `pod`: the kept one while fresh, else a new one
/// (else the kept one, stale).
pub(super) async fn resolve(inner: &Arc<Inner>, pod: &Pod, reference: &Reference) -> Resolution {
    let Reference::ServiceAccountToken { service_account, audience, expiration_seconds } =
        reference
    else {
        return Resolution::Unavailable("not a token".to_owned());
    };
    let key = TokenKey {
        uid: pod::uid(pod).to_owned(),
        service_account: service_account.clone(),
        audience: audience.clone(),
        expiration_seconds: *expiration_seconds,
    };
    let kept = lock(&inner.state).tokens.get(&key).cloned();
    // The server's clock: it set the token's expiry (issue 54: a board's clock that
    // stepped ahead must not make every token look stale).
    let now = server_time::trusted_timestamp();
    if let Some(token) = kept.as_ref().filter(|t| t.refresh_at() > now) {
        // A timer that fired early (a clock step) must not leave the token without one.
        let timer = lock(&inner.state).timers.get(&key).map(tokio::task::AbortHandle::is_finished);
        if timer.unwrap_or(true) {
            schedule(inner, &key, token.refresh_at());
        }
        return Resolution::Found(Object::Token(token.token.clone()));
    }
    // Offline, a kept token is all there is: no request that would wait for a timeout.
    if let Some(token) = kept.as_ref().filter(|_| !inner.client.connectivity().is_reachable()) {
        schedule(inner, &key, now);
        return Resolution::Found(Object::Token(token.token.clone()));
    }
    match request(inner, pod, &key).await {
        Ok(token) => {
            schedule(inner, &key, token.refresh_at());
            let value = token.token.clone();
            lock(&inner.state).tokens.insert(key, token);
            inner.save().await;
            Resolution::Found(Object::Token(value))
        }
        Err(error) => {
            let retry = now.saturating_add(RETRY).unwrap_or(now);
            schedule(inner, &key, retry);
            let why = format!(
                "cannot get a token for service account {}/{service_account}: {}",
                pod.metadata.namespace.as_deref().unwrap_or("default"),
                crate::error_chain::describe(&error)
            );
            match kept {
                Some(token) => {
                    tracing::warn!(pod.uid = key.uid, error = why, "keeping the old token");
                    Resolution::Found(Object::Token(token.token))
                }
                None => Resolution::Unavailable(why),
            }
        }
    }
}

/// A TokenRequest for the pod's service account, bound to the pod.
async fn request(inner: &Inner, pod: &Pod, key: &TokenKey) -> Result<Token, Error> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let api: Api<ServiceAccount> = Api::namespaced(inner.client.kube().clone(), namespace);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            // None: the API server's own audiences.
            audiences: (!key.audience.is_empty()).then(|| vec![key.audience.clone()]),
            expiration_seconds: Some(key.expiration_seconds),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("Pod".to_owned()),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            }),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let issued = server_time::trusted_timestamp();
    let answer: TokenRequest = api
        .create_subresource("token", &key.service_account, &PostParams::default(), &request)
        .await
        .map_err(Error::Request)?;
    let status = answer.status.unwrap_or_default();
    match (status.token, status.expiration_timestamp) {
        (Some(token), Some(expires)) if !token.is_empty() => {
            Ok(Token { token: token.into(), issued, expires: expires.0 })
        }
        _ => Err(Error::NoToken),
    }
}

/// Tells the pod at `at` (once the API server is reachable) that its token is due.
fn schedule(inner: &Arc<Inner>, key: &TokenKey, at: Timestamp) {
    let wait =
        Duration::try_from(at.duration_since(server_time::trusted_timestamp())).unwrap_or_default();
    let (this, uid) = (inner.clone(), key.uid.clone());
    let timer = tokio::spawn(async move {
        tokio::time::sleep(wait).await;
        this.client.connectivity().wait_reachable().await;
        this.tell(&uid);
    });
    if let Some(old) = lock(&inner.state).timers.insert(key.clone(), timer.abort_handle()) {
        old.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(lifetime_secs: i64) -> Token {
        let issued = Timestamp::from_second(1_800_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
        let expires = issued.saturating_add(SignedDuration::from_secs(lifetime_secs)).unwrap();
        Token { token: "t".into(), issued, expires }
    }

    #[test]
    fn v1_a_token_is_refreshed_at_80_percent_of_its_lifetime_or_after_a_day() {
        let after = |t: &Token| t.refresh_at().duration_since(t.issued).as_secs();
        assert_eq!(after(&token(3600)), 2880);
        assert_eq!(after(&token(3607)), 2885);
        assert_eq!(after(&token(10)), 8);
        assert_eq!(after(&token(7 * 24 * 3600)), 24 * 3600, "a week-long token: after a day");
        assert_eq!(after(&token(0)), 0);
        assert_eq!(after(&token(-5)), 0, "a token that expires before it is issued: at once");
    }
}
