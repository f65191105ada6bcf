//! The API server's side of N1: bearer tokens reviewed with a `TokenReview` and requests
//! authorized with a `SubjectAccessReview` (kubelet's webhook authenticator and
//! authorizer), through the agent's own API client, each answer cached as kubelet
//! caches it:
//!
//! - a TokenReview's answer, either way, for `authentication.webhook.cacheTTL` (2 m);
//! - a SubjectAccessReview's allow for `cacheAuthorizedTTL` (5 m), a denial for
//!   `cacheUnauthorizedTTL` (30 s).
//!
//! While the API server cannot be asked (unreachable, or not answering within
//! [`REVIEW_TIMEOUT`]): a token without a fresh answer is refused, saying so; a
//! SubjectAccessReview falls back to the last answer for the same user and attributes,
//! however old (a certificate caller, whose identity the TLS layer proves on the box,
//! keeps what it was last allowed or denied until the server answers again). Both caches
//! are bounded ([`CACHE_ENTRIES`]); tokens are kept only as their SHA-256.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::core::Request;
use kube::core::params::PostParams;
use outpost_core::node_api::{self, Attributes, Cache, Decision, Lookup};
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use super::user::User;
use crate::apiserver::{ApiClient, CallError};
use crate::config::node_api::Authorization;

/// The most answers each cache keeps: far more users and paths than one box's callers
/// use, a few hundred KiB at most.
pub const CACHE_ENTRIES: usize = 4096;
/// How long a review may take before the API server counts as unreachable for this
/// request: an offline box's callers are answered in seconds, not after TCP's timeout.
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(5);

const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
const SUBJECT_ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot check the bearer token with a TokenReview: {0}")]
    TokenReview(#[source] Failure),
    #[error(
        "cannot ask the API server whether {user} may {verb} nodes/{subresource} (SubjectAccessReview), and no earlier answer is cached: {source}"
    )]
    SubjectAccessReview {
        user: String,
        verb: String,
        subresource: &'static str,
        #[source]
        source: Failure,
    },
}

/// Why a review got no answer.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("the API server {server} is unreachable: no answer within {} s", .after.as_secs())]
    Timeout { server: String, after: Duration },
}

/// What a TokenReview said of a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenAnswer {
    Authenticated(Arc<User>),
    /// Not authenticated, with the server's `status.error` if it gave one.
    Refused(String),
}

/// The reviews of one node's API, with their caches.
#[derive(Debug)]
pub struct Reviewer {
    client: ApiClient,
    node_name: String,
    token_ttl: Option<Duration>,
    authorization: Authorization,
    tokens: Mutex<Cache<[u8; 32], TokenAnswer>>,
    decisions: Mutex<Cache<String, Decision>>,
    origin: Instant,
}

impl Reviewer {
    /// Reviews through `client` for the node `node_name`: tokens when `token_ttl` is set
    /// (their answers kept that long), requests when `authorization` is `Webhook`.
    pub fn new(
        client: ApiClient,
        node_name: String,
        token_ttl: Option<Duration>,
        authorization: Authorization,
    ) -> Reviewer {
        Reviewer {
            client,
            node_name,
            token_ttl,
            authorization,
            tokens: Mutex::new(Cache::new(CACHE_ENTRIES)),
            decisions: Mutex::new(Cache::new(CACHE_ENTRIES)),
            origin: Instant::now(),
        }
    }

    pub fn node_name(&self) -> &str {
        &self.node_name
    }

    /// Whether bearer tokens are reviewed.
    pub fn reviews_tokens(&self) -> bool {
        self.token_ttl.is_some()
    }

    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    /// Who `token` is, from a fresh cached answer or a TokenReview.
    pub async fn review_token(&self, token: &[u8]) -> Result<TokenAnswer, Error> {
        let key: [u8; 32] = Sha256::digest(token).into();
        if let Lookup::Fresh(answer) = lock(&self.tokens).get(&key, self.now()) {
            return Ok(answer);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: String::from_utf8_lossy(token).into_owned(),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let answer: TokenReview =
            self.create(TOKEN_REVIEWS, &review).await.map_err(Error::TokenReview)?;
        let status = answer.status.unwrap_or_default();
        let answer = match (status.authenticated, status.user) {
            (Some(true), Some(info)) => TokenAnswer::Authenticated(Arc::new(User::authenticated(
                info.username.unwrap_or_default(),
                info.uid.unwrap_or_default(),
                info.groups.unwrap_or_default(),
                info.extra.unwrap_or_default(),
            ))),
            _ => TokenAnswer::Refused(status.error.unwrap_or_default()),
        };
        if let Some(ttl) = self.token_ttl {
            lock(&self.tokens).insert(key, answer.clone(), ttl, self.now());
        }
        Ok(answer)
    }

    /// Whether `user` may make a request with these attribute sets: kubelet's rule, the
    /// first allowed lets it on. Each set's answer comes from the cache while fresh, else
    /// from a SubjectAccessReview, else (no answer) from the cache however old.
    pub async fn authorize(
        &self,
        user: &User,
        attributes: &[Attributes],
    ) -> Result<Decision, Error> {
        let Authorization::Webhook { authorized_ttl, unauthorized_ttl } = self.authorization else {
            return Ok(Decision::Allow);
        };
        for attributes in attributes {
            let spec = spec(user, attributes);
            let key = serde_json::to_string(&spec).unwrap_or_default();
            let cached = lock(&self.decisions).get(&key, self.now());
            let decision = match cached {
                Lookup::Fresh(decision) => decision,
                cached => match self.review(spec).await {
                    Ok(decision) => {
                        let ttl = match decision {
                            Decision::Allow => authorized_ttl,
                            Decision::Deny => unauthorized_ttl,
                        };
                        lock(&self.decisions).insert(key, decision, ttl, self.now());
                        decision
                    }
                    Err(source) => match cached {
                        Lookup::Stale(decision) => {
                            tracing::warn!(
                                user = %user.name, verb = %attributes.verb,
                                subresource = attributes.subresource, ?decision, error = %source,
                                "the API server cannot be asked; using the last SubjectAccessReview answer"
                            );
                            decision
                        }
                        _ => {
                            return Err(Error::SubjectAccessReview {
                                user: user.name.clone(),
                                verb: attributes.verb.to_string(),
                                subresource: attributes.subresource,
                                source,
                            });
                        }
                    },
                },
            };
            if decision == Decision::Allow {
                return Ok(Decision::Allow);
            }
        }
        Ok(Decision::Deny)
    }

    async fn review(&self, spec: SubjectAccessReviewSpec) -> Result<Decision, Failure> {
        let review = SubjectAccessReview { spec, ..SubjectAccessReview::default() };
        let answer: SubjectAccessReview = self.create(SUBJECT_ACCESS_REVIEWS, &review).await?;
        let allowed = answer.status.is_some_and(|s| s.allowed && s.denied != Some(true));
        Ok(if allowed { Decision::Allow } else { Decision::Deny })
    }

    /// Creates a review object and returns the server's answer (reviews are not stored).
    async fn create<T: serde::Serialize + serde::de::DeserializeOwned>(
        &self,
        path: &str,
        review: &T,
    ) -> Result<T, Failure> {
        let body = serde_json::to_vec(review).unwrap_or_default();
        let request = Request::new(path).create(&PostParams::default(), body);
        match tokio::time::timeout(REVIEW_TIMEOUT, self.client.call::<T>(request)).await {
            Ok(answer) => Ok(answer?),
            Err(_) => Err(Failure::Timeout {
                server: self.client.server().to_owned(),
                after: REVIEW_TIMEOUT,
            }),
        }
    }
}

/// The SubjectAccessReview of one attribute set: `nodes/<subresource>` named after the
/// node, API version `v1`, for `user`.
fn spec(user: &User, attributes: &Attributes) -> SubjectAccessReviewSpec {
    SubjectAccessReviewSpec {
        user: Some(user.name.clone()),
        uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
        groups: Some(user.groups.clone()),
        extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
        resource_attributes: Some(ResourceAttributes {
            verb: Some(attributes.verb.to_string()),
            group: Some(String::new()),
            version: Some(node_api::attributes::API_VERSION.to_owned()),
            resource: Some(node_api::RESOURCE.to_owned()),
            subresource: Some(attributes.subresource.to_owned()),
            name: Some(attributes.name.clone()),
            namespace: Some(String::new()),
            ..ResourceAttributes::default()
        }),
        non_resource_attributes: None,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether a failure means the API server could not be reached.
pub fn unreachable(error: &Error) -> bool {
    let failure = match error {
        Error::TokenReview(failure) | Error::SubjectAccessReview { source: failure, .. } => failure,
    };
    match failure {
        Failure::Timeout { .. } => true,
        Failure::Call(call) => call.is_unreachable(),
    }
}
