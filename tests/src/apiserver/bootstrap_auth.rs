//! Bootstrap-token authentication, as the real server's with
//! `--enable-bootstrap-token-auth`: a bearer token `ID.SECRET` (6 and 16 characters of
//! `[a-z0-9]`) is the user `system:bootstrap:<id>` in the group `system:bootstrappers`
//! (and those of `auth-extra-groups`) when the Secret `kube-system/bootstrap-token-<id>`
//! of type `bootstrap.kubernetes.io/token` has that `token-secret`,
//! `usage-bootstrap-authentication: "true"`, and an `expiration` (RFC 3339) still in
//! the future, if it has one. A token of that form that matches no such Secret is
//! refused (401), as by the real server, where no other authenticator takes it.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

use super::authn::User;
use super::resource::SECRETS;
use super::store::Store;

/// The Secret type of bootstrap tokens.
pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";

/// The group every bootstrap token is in.
pub const GROUP: &str = "system:bootstrappers";

/// The extra group kubeadm gives the tokens it makes (`kubeadm token create`).
pub const KUBEADM_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";

/// Whether `part` is `len` characters of `[a-z0-9]`.
fn well_formed(part: &str, len: usize) -> bool {
    part.len() == len && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// Whether `token` has a bootstrap token's form, `ID.SECRET`.
pub fn is_bootstrap_token(token: &str) -> bool {
    token.split_once('.').is_some_and(|(id, secret)| well_formed(id, 6) && well_formed(secret, 16))
}

/// The user of `token` if it is a valid bootstrap token.
pub fn user(store: &Store, token: &str) -> Option<User> {
    let (id, secret) = token.split_once('.')?;
    if !well_formed(id, 6) || !well_formed(secret, 16) {
        return None;
    }
    let object = store.get(&SECRETS, Some("kube-system"), &format!("bootstrap-token-{id}")).ok()?;
    if object.get("type").and_then(Value::as_str) != Some(SECRET_TYPE) {
        return None;
    }
    let field = |name: &str| -> Option<String> {
        let encoded = object.get("data")?.get(name)?.as_str()?;
        String::from_utf8(BASE64.decode(encoded).ok()?).ok()
    };
    if field("token-id").is_some_and(|stored| stored != id)
        || field("token-secret")? != secret
        || field("usage-bootstrap-authentication").as_deref() != Some("true")
    {
        return None;
    }
    if let Some(expiration) = field("expiration") {
        let expiration: jiff::Timestamp = expiration.parse().ok()?;
        if expiration <= jiff::Timestamp::now() {
            return None;
        }
    }
    let mut groups = vec![GROUP.to_owned()];
    let extra = field("auth-extra-groups").unwrap_or_default();
    groups.extend(extra.split(',').map(str::trim).filter(|g| !g.is_empty()).map(str::to_owned));
    groups.push("system:authenticated".to_owned());
    Some(User(json!({ "username": format!("system:bootstrap:{id}"), "groups": groups })))
}

/// A bootstrap token Secret as `kubeadm token create` makes it: for authentication and
/// signing, in [`KUBEADM_GROUP`], expiring at `expiration` (RFC 3339) if given.
pub fn secret(id: &str, secret: &str, expiration: Option<&str>) -> Value {
    let mut data = json!({
        "token-id": id,
        "token-secret": secret,
        "usage-bootstrap-authentication": "true",
        "usage-bootstrap-signing": "true",
        "auth-extra-groups": KUBEADM_GROUP,
    });
    if let Some(expiration) = expiration {
        data["expiration"] = json!(expiration);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": { "name": format!("bootstrap-token-{id}"), "namespace": "kube-system" },
        "type": SECRET_TYPE,
        "stringData": data,
    })
}

/// A new random token `ID.SECRET`.
pub fn generate() -> (String, String) {
    let part = |len: usize| -> String {
        (0..len)
            .map(|_| {
                let n = fastrand::u8(0..36);
                char::from(if n < 10 { b'0' + n } else { b'a' + n - 10 })
            })
            .collect()
    };
    (part(6), part(16))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::resource::SECRETS;

    fn store_with(secret: Value) -> Store {
        let store = Store::new(100);
        store.create(&SECRETS, Some("kube-system"), secret).unwrap();
        store
    }

    /// J1: a bootstrap token authenticates as `system:bootstrap:<id>` until it expires.
    #[test]
    fn j1_bootstrap_token_authenticates_until_it_expires() {
        let (id, token_secret) = generate();
        let token = format!("{id}.{token_secret}");
        let store = store_with(secret(&id, &token_secret, None));
        let user = user(&store, &token).unwrap();
        assert_eq!(user.0["username"], format!("system:bootstrap:{id}"));
        assert_eq!(user.0["groups"], json!([GROUP, KUBEADM_GROUP, "system:authenticated"]));
        assert!(self::user(&store, &format!("{id}.{}", "0".repeat(16))).is_none());
        assert!(self::user(&store, "abc.def").is_none());
        let past = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(1);
        let store = store_with(secret(&id, &token_secret, Some(&past.to_string())));
        assert!(self::user(&store, &token).is_none());
        let future = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(60);
        let store = store_with(secret(&id, &token_secret, Some(&future.to_string())));
        assert!(self::user(&store, &token).is_some());
    }
}
