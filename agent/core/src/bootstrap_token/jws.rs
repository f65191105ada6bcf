//! The detached JWS of `cluster-info` (RFC 7515 appendix F): the compact serialization of
//! an HS256 JWS over the ConfigMap's `kubeconfig`, with the payload left out:
//! `<header>..<signature>`. The protected header is `{"alg":"HS256","kid":"<id>"}`; the
//! key is the token's secret, zero-padded to 32 bytes (as the bootstrap signer pads it
//! for its JOSE library; HMAC pads it the same way anyway).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::hmac;

use super::{Error, Token};

fn header(id: &str) -> String {
    B64.encode(format!(r#"{{"alg":"HS256","kid":"{id}"}}"#))
}

fn key(secret: &str) -> hmac::Key {
    let mut key = secret.as_bytes().to_vec();
    if key.len() < 32 {
        key.resize(32, 0);
    }
    hmac::Key::new(hmac::HMAC_SHA256, &key)
}

fn signing_input(header: &str, content: &str) -> String {
    format!("{header}.{}", B64.encode(content))
}

/// The detached JWS of `content` with `token`, as the bootstrap signer stores it.
pub fn sign(content: &str, token: &Token) -> String {
    detached(content, token.id(), token.secret())
}

/// The detached JWS of `content` with a token's id and secret.
fn detached(content: &str, id: &str, secret: &str) -> String {
    let header = header(id);
    let tag = hmac::sign(&key(secret), signing_input(&header, content).as_bytes());
    format!("{header}..{}", B64.encode(tag.as_ref()))
}

/// Whether `detached` is the signature of `content` with `token` (the signature compared
/// in constant time); `JwsMalformed` when it is not a detached HS256 JWS with this
/// token's id, `JwsMismatch` when the signature differs.
pub fn verify(detached: &str, content: &str, token: &Token) -> Result<(), Error> {
    let malformed = |reason: &str| Error::JwsMalformed { reason: reason.to_owned() };
    let mut parts = detached.split('.');
    let (Some(got_header), Some(""), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed("not of the form <header>..<signature>"));
    };
    let header = header(token.id());
    if got_header != header {
        // Not secret: the header is the same for every holder of the token's id.
        return Err(malformed("its header is not {\"alg\":\"HS256\",\"kid\":\"<token id>\"}"));
    }
    let signature =
        B64.decode(signature).map_err(|_| malformed("its signature is not base64url"))?;
    hmac::verify(&key(token.secret()), signing_input(&header, content).as_bytes(), &signature)
        .map_err(|_| Error::JwsMismatch { id: token.id().to_owned() })
}
