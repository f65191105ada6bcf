//! The operator commands' client of the agent's local API (`outpost pods`, `describe`,
//! `status`, `logs`, `exec`): where the agent listens and which credentials to send, from the
//! flags or else the agent's own config file (`listen`/`address`/`port`, `tokenFile`,
//! `tlsCertFile`). Credentials are always sent when there are any; errors say what was
//! sent and where it came from, never the token itself.

mod credentials;

use std::path::{Path, PathBuf};

use reqwest::{StatusCode, Url};
use serde::de::DeserializeOwned;

use self::credentials::Credentials;
use crate::cli::{AGENT_CONFIG, ClientArgs};
use crate::config::{self, Config, Settings};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] config::Error),
    #[error("--server {url:?}: {reason}; expected a URL such as http://127.0.0.1:10250")]
    Url { url: String, reason: String },
    #[error("cannot read the token file {} ({origin})", path.display())]
    TokenFile {
        path: PathBuf,
        origin: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the token file {} ({origin}) is empty", path.display())]
    EmptyToken { path: PathBuf, origin: String },
    #[error("{flag} {}: {reason}", path.display())]
    Tls { flag: &'static str, path: PathBuf, reason: String },
    #[error("cannot set up TLS to the agent")]
    TlsConfig(#[source] rustls::Error),
    #[error("cannot set up the HTTP client")]
    Client(#[source] reqwest::Error),
    #[error("cannot start the I/O runtime")]
    Runtime(#[source] std::io::Error),
    #[error(
        "cannot reach the Outpost agent at {url} ({reason}): is it running? (systemctl status outpost)"
    )]
    Unreachable { url: String, reason: String },
    #[error("the Outpost agent at {url} refused the request ({code}): {message}\n{credentials}")]
    Denied { url: String, code: u16, message: String, credentials: String },
    /// The agent does not have the object (its `metav1.Status` message).
    #[error("{0}")]
    NotFound(String),
    #[error("GET {url}: the agent answered {code}: {message}")]
    Status { url: String, code: u16, message: String },
    #[error("GET {url}: the answer broke off")]
    Read {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("GET {url}: the answer is not what this outpost expects (agent of another version?)")]
    Decode {
        url: String,
        #[source]
        source: serde_json::Error,
    },
}

impl Error {
    /// The agent could not be reached at all (the caller may fall back to local files).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Error::Unreachable { .. })
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A client of one agent.
#[derive(Debug)]
pub struct Client {
    http: reqwest::Client,
    base: Url,
    credentials: Credentials,
    /// The TLS client configuration (https), for connections made without `http`.
    tls: std::sync::Arc<rustls::ClientConfig>,
    config: Option<Config>,
}

impl Client {
    /// Resolves the server and credentials from `args`, then the agent's config file.
    pub fn new(args: &ClientArgs) -> Result<Client> {
        let config_path = args
            .config
            .clone()
            .or_else(|| Path::new(AGENT_CONFIG).is_file().then(|| AGENT_CONFIG.into()));
        let config = match config_path {
            Some(path) => Some(Config::resolve(Settings {
                config: Some(path),
                // The node name is not needed: spare the hostname lookup.
                node_name: Some("-".to_owned()),
                ..Settings::default()
            })?),
            None => None,
        };
        let server = match (&args.server, &config) {
            (Some(server), _) => server.clone(),
            (None, Some(config)) => server_of(config),
            (None, None) => format!("http://{}", config::DEFAULT_LISTEN),
        };
        let base = Url::parse(&server)
            .map_err(|e| Error::Url { url: server.clone(), reason: e.to_string() })?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(Error::Url { url: server, reason: "not an http or https URL".into() });
        }
        let config_file = args.config.clone().unwrap_or_else(|| AGENT_CONFIG.into());
        let credentials = Credentials::load(args, config.as_ref(), &config_file)?;
        let tls = credentials.tls_config(args, config.as_ref())?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls.clone())
            .connect_timeout(std::time::Duration::from_secs(10))
            .user_agent(concat!("outpost/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(Error::Client)?;
        Ok(Client { http, base, credentials, tls: std::sync::Arc::new(tls), config })
    }

    /// The agent's config, when one was read.
    pub fn agent_config(&self) -> Option<&Config> {
        self.config.as_ref()
    }

    /// The base URL requests go to.
    pub fn server(&self) -> &Url {
        &self.base
    }

    /// The bearer token sent, if any.
    pub fn token(&self) -> Option<&str> {
        self.credentials.token()
    }

    /// The TLS configuration requests to an https server use.
    pub fn tls_config(&self) -> std::sync::Arc<rustls::ClientConfig> {
        self.tls.clone()
    }

    /// The agent cannot be reached at all.
    pub fn unreachable(&self, reason: String) -> Error {
        Error::Unreachable { url: self.base.as_str().trim_end_matches('/').to_owned(), reason }
    }

    /// The error for an answer other than 2xx to a request of `url`: refused (401/403,
    /// with what was sent), not found (a `metav1.Status` 404), or the agent's message.
    pub fn refusal(&self, url: String, code: StatusCode, body: &str) -> Error {
        let message = message(body)
            .unwrap_or_else(|| "no explanation (an agent without this endpoint?)".to_owned());
        match code {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Error::Denied {
                url,
                code: code.as_u16(),
                message,
                credentials: self.credentials.describe(),
            },
            StatusCode::NOT_FOUND if is_status(body) => Error::NotFound(message),
            _ => Error::Status { url, code: code.as_u16(), message },
        }
    }

    /// The URL of `segments` (each escaped) with `query`.
    pub fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    /// `GET` with the credentials; an answer other than 2xx is an error.
    pub async fn get(&self, url: Url) -> Result<reqwest::Response> {
        let shown = url.to_string();
        let mut request = self.http.get(url);
        if let Some(token) = self.credentials.token() {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| self.unreachable(reason(&e)))?;
        let code = response.status();
        if code.is_success() {
            return Ok(response);
        }
        let body = response.text().await.unwrap_or_default();
        Err(self.refusal(shown, code, &body))
    }

    /// `POST` of a JSON document with the credentials; the answer's JSON document. An
    /// answer other than 2xx is an error.
    pub async fn post_json<T: DeserializeOwned>(
        &self,
        url: Url,
        body: &serde_json::Value,
    ) -> Result<T> {
        let shown = url.to_string();
        let bytes = serde_json::to_vec(body).unwrap_or_default();
        let mut request = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(bytes);
        if let Some(token) = self.credentials.token() {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| self.unreachable(reason(&e)))?;
        let code = response.status();
        let bytes =
            response.bytes().await.map_err(|source| Error::Read { url: shown.clone(), source })?;
        if !code.is_success() {
            return Err(self.refusal(shown, code, &String::from_utf8_lossy(&bytes)));
        }
        crate::json::from_slice(&bytes).map_err(|source| Error::Decode { url: shown, source })
    }

    /// `GET` of a JSON document.
    pub async fn get_json<T: DeserializeOwned>(&self, url: Url) -> Result<T> {
        let shown = url.to_string();
        let body = self
            .get(url)
            .await?
            .bytes()
            .await
            .map_err(|source| Error::Read { url: shown.clone(), source })?;
        crate::json::from_slice(&body).map_err(|source| Error::Decode { url: shown, source })
    }
}

/// The agent's address as its config says: https when it serves TLS, loopback when it
/// listens on every address.
fn server_of(config: &Config) -> String {
    let scheme = if config.api.auth.tls.is_some() { "https" } else { "http" };
    let mut addr = config.api.listen;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr.ip() {
            std::net::IpAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    format!("{scheme}://{addr}")
}

/// Why a request got no answer, in a few words: `connection refused`, `timed out`, or
/// the innermost cause.
fn reason(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        return "timed out".to_owned();
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    let mut innermost = error.to_string();
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return "connection refused".to_owned(),
                std::io::ErrorKind::NotFound => return "no such socket".to_owned(),
                _ => {}
            }
        }
        innermost = e.to_string();
        source = e.source();
    }
    innermost
}

/// The message of an error answer: a `metav1.Status`'s, the local API's `{"error": ...}`,
/// or the text itself.
fn message(body: &str) -> Option<String> {
    let text = body.trim();
    if text.is_empty() {
        return None;
    }
    let json: Option<serde_json::Value> = serde_json::from_str(text).ok();
    let field = |name: &str| json.as_ref()?.get(name)?.as_str().map(str::to_owned);
    let said = field("message").or_else(|| field("error")).unwrap_or_else(|| text.to_owned());
    // The local API's `details`: one line per problem.
    let details: Vec<&str> = json
        .as_ref()
        .and_then(|j| j.get("details")?.as_array())
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .collect();
    if details.is_empty() {
        return Some(said);
    }
    Some(format!("{said}:\n  {}", details.join("\n  ")))
}

/// Whether `body` is a `metav1.Status` (the agent's "no such object", not a missing route).
fn is_status(body: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(body).is_ok_and(|v| v["kind"] == "Status")
}

/// A current-thread runtime for one command's requests.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(Error::Runtime)
}

/// `NAMESPACE/NAME`, or `NAME` in namespace `default`.
pub fn split_pod(pod: &str) -> (&str, &str) {
    pod.split_once('/').unwrap_or(("default", pod))
}

#[cfg(test)]
mod tests;
