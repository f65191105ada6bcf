//! Service account tokens: JWTs signed ES256 with the server's own P-256 key, with the
//! claims the real server's token issuer writes (`iss`, `sub`, `aud`, `exp`, `iat`,
//! `nbf`, `jti` and the private `kubernetes.io` claim naming the namespace, the
//! service account and the pod, node or secret the token is bound to), and their
//! verification, as the real server's authenticator does it.
//!
//! The `key id` in the header is the real server's: the SHA-256 of the public key's
//! PKIX DER form, base64url.

mod request;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as BASE64URL;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair as _};
use serde::{Deserialize, Serialize};
use serde_json::json;

pub use request::{WARN_ONLY_EXPIRATION, create};

/// The issuer and the default audience of the server's tokens, as kube-apiserver's
/// default `--service-account-issuer` in a cluster with the default DNS domain.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The PKIX `SubjectPublicKeyInfo` DER prefix of a P-256 public key (before its
/// 65-byte uncompressed point).
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// The claims of a service account token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenClaims {
    pub iss: String,
    /// `system:serviceaccount:<namespace>:<name>`.
    pub sub: String,
    pub aud: Vec<String>,
    pub exp: i64,
    pub iat: i64,
    pub nbf: i64,
    pub jti: String,
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaims,
}

/// The private `kubernetes.io` claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesClaims {
    pub namespace: String,
    pub serviceaccount: ObjectRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<ObjectRef>,
    /// The node of the bound pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<ObjectRef>,
    /// When a token with an extended lifetime (a pod-bound 3607 s one, extended to a
    /// year as the real server does) should have been refreshed: the end of the
    /// lifetime that was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnafter: Option<i64>,
}

/// An object a token names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

/// Why a token is not a valid token of this server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the token is not a JWT (header.claims.signature, base64url JSON): {0}")]
    Malformed(String),
    #[error("the token is not signed ES256 by this server's service account key")]
    Signature,
    #[error("the token's issuer {0:?} is not {ISSUER:?}")]
    Issuer(String),
    #[error("the token expired at {exp} (now {now})")]
    Expired { exp: i64, now: i64 },
    #[error("the token is not valid before {nbf} (now {now})")]
    NotYetValid { nbf: i64, now: i64 },
}

/// The key the server signs tokens with.
#[derive(Debug)]
pub struct Signer {
    key: EcdsaKeyPair,
    key_id: String,
    rng: SystemRandom,
}

/// The signing key could not be made.
#[derive(Debug, thiserror::Error)]
#[error("cannot generate the service account signing key (P-256)")]
pub struct KeyError;

impl Signer {
    /// A new random P-256 key.
    pub fn generate() -> Result<Signer, KeyError> {
        let rng = SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).map_err(|_| KeyError)?;
        let key = EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).map_err(|_| KeyError)?;
        let spki = [&P256_SPKI_PREFIX[..], key.public_key().as_ref()].concat();
        let key_id = BASE64URL.encode(ring::digest::digest(&ring::digest::SHA256, &spki));
        Ok(Signer { key, key_id, rng })
    }

    /// The signed JWT of `claims`.
    pub fn sign(&self, claims: &TokenClaims) -> Result<String, KeyError> {
        let header = json!({ "alg": "ES256", "kid": self.key_id });
        let encode = |value: &serde_json::Value| BASE64URL.encode(value.to_string());
        let claims = serde_json::to_value(claims).map_err(|_| KeyError)?;
        let signed = format!("{}.{}", encode(&header), encode(&claims));
        let signature = self.key.sign(&self.rng, signed.as_bytes()).map_err(|_| KeyError)?;
        Ok(format!("{signed}.{}", BASE64URL.encode(signature.as_ref())))
    }

    /// The claims of `token` if this key signed it, its issuer is [`ISSUER`] and it is
    /// valid now.
    pub fn verify(&self, token: &str) -> Result<TokenClaims, TokenError> {
        let claims = self.decode(token)?;
        let now = jiff::Timestamp::now().as_second();
        if now >= claims.exp {
            return Err(TokenError::Expired { exp: claims.exp, now });
        }
        if now < claims.nbf {
            return Err(TokenError::NotYetValid { nbf: claims.nbf, now });
        }
        Ok(claims)
    }

    /// The claims of `token` if this key signed it and its issuer is [`ISSUER`],
    /// whether or not it is valid now.
    pub fn decode(&self, token: &str) -> Result<TokenClaims, TokenError> {
        let malformed = |what: &str| TokenError::Malformed(what.to_string());
        let (signed, signature) = token.rsplit_once('.').ok_or_else(|| malformed("no dots"))?;
        let (header, claims) = signed.split_once('.').ok_or_else(|| malformed("one dot"))?;
        let decode = |part: &str| BASE64URL.decode(part).map_err(|e| malformed(&e.to_string()));
        let header: serde_json::Value =
            serde_json::from_slice(&decode(header)?).map_err(|e| malformed(&e.to_string()))?;
        if header.get("alg").and_then(|a| a.as_str()) != Some("ES256") {
            return Err(TokenError::Signature);
        }
        let public = signature::UnparsedPublicKey::new(
            &signature::ECDSA_P256_SHA256_FIXED,
            self.key.public_key().as_ref(),
        );
        public.verify(signed.as_bytes(), &decode(signature)?).map_err(|_| TokenError::Signature)?;
        let claims: TokenClaims =
            serde_json::from_slice(&decode(claims)?).map_err(|e| malformed(&e.to_string()))?;
        if claims.iss != ISSUER {
            return Err(TokenError::Issuer(claims.iss));
        }
        Ok(claims)
    }
}
