//! Registry credentials as kubelet keeps them: a keyring built from docker config JSON
//! (a `kubernetes.io/dockerconfigjson` Secret's `.dockerconfigjson`, a `.dockercfg`, or a
//! node file such as `/var/lib/kubelet/config.json`), looked up by image with kubelet's
//! matching rules. No IO. Secrets never show in `Debug` output.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use serde::Deserialize;

#[cfg(test)]
mod tests;

/// The key docker (and kubelet) file Docker Hub's credentials under.
const DOCKER_HUB_KEY: &str = "index.docker.io";

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "docker config: not JSON of the form {{\"auths\": {{\"REGISTRY\": {{\"auth\": ...}}}}}}"
    )]
    Json(#[source] serde_json::Error),
    #[error("docker config: the auth of {registry:?} is not base64 of USER:PASSWORD")]
    Auth { registry: String },
}

/// One set of credentials for a registry.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Credential {
    pub username: String,
    pub password: String,
    /// An OAuth2 refresh token (`identitytoken`), traded for an access token.
    pub identity_token: Option<String>,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .field("identity_token", &self.identity_token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Credentials by registry key (`host[:port][/path]`, the host possibly with `*` globs).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Keyring {
    /// Keys in kubelet's order: reverse-sorted, so a longer path comes before its prefix.
    entries: BTreeMap<std::cmp::Reverse<String>, Vec<Credential>>,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<&str> = self.entries.keys().map(|key| key.0.as_str()).collect();
        f.debug_struct("Keyring").field("registries", &keys).finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct DockerConfig {
    auths: BTreeMap<String, Entry>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Entry {
    auth: String,
    username: String,
    password: String,
    identitytoken: String,
}

impl Keyring {
    /// Parses docker config JSON: `{"auths": {KEY: ENTRY}}`, or the older `.dockercfg`
    /// form `{KEY: ENTRY}`. An entry has `auth` (base64 of `user:password`, which wins) or
    /// `username` and `password`, and maybe `identitytoken`. Entries with none are skipped.
    pub fn from_docker_config(bytes: &[u8]) -> Result<Keyring> {
        let auths = match serde_json::from_slice::<DockerConfig>(bytes) {
            Ok(config) => config.auths,
            Err(_) => serde_json::from_slice(bytes).map_err(Error::Json)?,
        };
        let mut keyring = Keyring::default();
        for (registry, entry) in auths {
            let mut credential = Credential {
                username: entry.username,
                password: entry.password,
                identity_token: Some(entry.identitytoken).filter(|token| !token.is_empty()),
            };
            if !entry.auth.is_empty() {
                let bad = || Error::Auth { registry: registry.clone() };
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(entry.auth.trim())
                    .map_err(|_| bad())?;
                let decoded = String::from_utf8(decoded).map_err(|_| bad())?;
                let (username, password) = decoded.split_once(':').ok_or_else(bad)?;
                credential.username = username.to_owned();
                credential.password = password.to_owned();
            }
            if credential != Credential::default() {
                keyring.add(&registry, credential);
            }
        }
        Ok(keyring)
    }

    /// Adds every credential of `other`; for the same key, this keyring's come first.
    pub fn merge(&mut self, other: Keyring) {
        for (key, credentials) in other.entries {
            self.entries.entry(key).or_default().extend(credentials);
        }
    }

    /// The credentials to try for `image` (a reference, normalized or not; tag and
    /// digest are ignored), most specific key first, as kubelet orders them. Docker Hub
    /// images fall back to the credentials filed under `index.docker.io`
    /// (`https://index.docker.io/v1/`).
    pub fn lookup(&self, image: &str) -> Vec<Credential> {
        let target = repository(image);
        let mut found: Vec<Credential> = Vec::new();
        for (key, credentials) in &self.entries {
            if key_matches(&key.0, &target) {
                found.extend(credentials.iter().cloned());
            }
        }
        if found.is_empty() && is_docker_hub(&target) {
            let hub = std::cmp::Reverse(DOCKER_HUB_KEY.to_owned());
            found.extend(self.entries.get(&hub).into_iter().flatten().cloned());
        }
        let mut unique: Vec<Credential> = Vec::with_capacity(found.len());
        for credential in found {
            if !unique.contains(&credential) {
                unique.push(credential);
            }
        }
        unique
    }

    fn add(&mut self, registry: &str, credential: Credential) {
        self.entries.entry(std::cmp::Reverse(key(registry))).or_default().push(credential);
    }
}

/// A config key as kubelet files it: no scheme, `/v1/` and `/v2/` prefixes of the path
/// dropped (`https://index.docker.io/v1/` → `index.docker.io`), and a bare `/` path too.
fn key(registry: &str) -> String {
    let rest = registry
        .strip_prefix("https://")
        .or_else(|| registry.strip_prefix("http://"))
        .unwrap_or(registry);
    let (host, path) = match rest.find('/') {
        Some(slash) => (&rest[..slash], &rest[slash..]),
        None => (rest, ""),
    };
    let path = ["/v1/", "/v2/"]
        .iter()
        .find_map(|prefix| path.strip_prefix(prefix).map(|rest| format!("/{rest}")))
        .unwrap_or_else(|| path.to_owned());
    if path.is_empty() || path == "/" { host.to_owned() } else { format!("{host}{path}") }
}

/// The image's `host/path` without tag or digest; a name without a registry host is on
/// Docker Hub (`busybox` → `docker.io/library/busybox`).
fn repository(image: &str) -> String {
    let name = image.split_once('@').map_or(image, |(name, _)| name);
    let name = match name.rfind(':') {
        Some(colon) if !name[colon..].contains('/') => &name[..colon],
        _ => name,
    };
    match name.split_once('/') {
        Some((DOCKER_HUB_KEY, path)) => format!("docker.io/{path}"),
        Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => name.to_owned(),
        Some(_) => format!("docker.io/{name}"),
        None => format!("docker.io/library/{name}"),
    }
}

fn is_docker_hub(repository: &str) -> bool {
    repository.starts_with("docker.io/")
}

/// kubelet's `URLsMatch`: the same port, as many host labels each matching (the key's
/// may be globs), and the key's path a prefix of the image's.
fn key_matches(key: &str, target: &str) -> bool {
    let split = |s: &str| -> (String, String) {
        match s.find('/') {
            Some(slash) => (s[..slash].to_owned(), s[slash..].to_owned()),
            None => (s.to_owned(), String::new()),
        }
    };
    let ((key_host, key_path), (host, path)) = (split(key), split(target));
    let (key_labels, key_port) = host_port(&key_host);
    let (labels, port) = host_port(&host);
    key_port == port
        && key_labels.len() == labels.len()
        && key_labels.iter().zip(&labels).all(|(glob, label)| glob_matches(glob, label))
        && path.starts_with(&key_path)
}

fn host_port(host: &str) -> (Vec<&str>, &str) {
    let (name, port) = match host.rsplit_once(':') {
        Some((name, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            (name, port)
        }
        _ => (host, ""),
    };
    (name.split('.').collect(), port)
}

/// Shell-style matching of one host label: `*` any run of characters, `?` one.
fn glob_matches(glob: &str, text: &str) -> bool {
    let (glob, text) = (glob.as_bytes(), text.as_bytes());
    let (mut g, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if g < glob.len() && (glob[g] == b'?' || glob[g].eq_ignore_ascii_case(&text[t])) {
            g += 1;
            t += 1;
        } else if g < glob.len() && glob[g] == b'*' {
            star = Some((g, t));
            g += 1;
        } else if let Some((star_g, star_t)) = star {
            g = star_g + 1;
            t = star_t + 1;
            star = Some((star_g, star_t + 1));
        } else {
            return false;
        }
    }
    glob[g..].iter().all(|&b| b == b'*')
}
