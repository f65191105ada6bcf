//! Answering a registry's `401` challenge (`WWW-Authenticate`): `Basic` with the
//! credential's username and password; `Bearer` with a token from the realm the
//! challenge names (docker's token protocol: a GET with basic auth or none, or an OAuth2
//! refresh-token POST when the credential is an identity token).

use base64::Engine as _;
use reqwest::header::{self, HeaderValue};
use reqwest::{Response, Url};
use serde::Deserialize;

use super::{Error, Repository};

/// What a `WWW-Authenticate` header asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    Basic,
    Bearer { realm: String, service: Option<String>, scope: Option<String> },
}

impl Challenge {
    /// Parses `Scheme key="value", key=value, ...` (scheme case-insensitive).
    pub fn parse(header: &str) -> Option<Challenge> {
        let header = header.trim();
        let (scheme, rest) = header.split_once(char::is_whitespace).unwrap_or((header, ""));
        if scheme.eq_ignore_ascii_case("basic") {
            return Some(Challenge::Basic);
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let parameters = parameters(rest);
        let get = |key: &str| {
            parameters.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v.clone())
        };
        Some(Challenge::Bearer {
            realm: get("realm")?,
            service: get("service"),
            scope: get("scope"),
        })
    }
}

/// `key=value` pairs separated by commas; a value may be a quoted string with `\` escapes.
fn parameters(text: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace() || *c == ',').is_some() {}
        let key: String = std::iter::from_fn(|| chars.next_if(|c| *c != '=')).collect();
        if chars.next().is_none() {
            return pairs;
        }
        let mut value = String::new();
        if chars.next_if_eq(&'"').is_some() {
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => value.extend(chars.next()),
                    c => value.push(c),
                }
            }
        } else {
            value.extend(std::iter::from_fn(|| chars.next_if(|c| *c != ',')));
        }
        pairs.push((key.trim().to_owned(), value.trim().to_owned()));
    }
}

/// A token server's answer (`token`, or OAuth2's `access_token`).
#[derive(Debug, Deserialize)]
pub struct TokenResponse {
    #[serde(default)]
    token: String,
    #[serde(default)]
    access_token: String,
}

impl TokenResponse {
    pub fn token(self) -> Option<String> {
        [self.token, self.access_token].into_iter().find(|token| !token.is_empty())
    }
}

impl Repository {
    /// The `Authorization` that answers the challenge of a `401` response.
    pub(super) async fn authorize(&self, response: &Response) -> Result<HeaderValue, Error> {
        let challenges = response.headers().get_all(header::WWW_AUTHENTICATE);
        let parsed: Vec<Challenge> = challenges
            .iter()
            .filter_map(|value| value.to_str().ok())
            .filter_map(Challenge::parse)
            .collect();
        let challenge = parsed
            .iter()
            .find(|c| matches!(c, Challenge::Bearer { .. }))
            .or_else(|| parsed.first())
            .ok_or_else(|| {
                self.unauthorized("401 without a Basic or Bearer challenge".to_owned())
            })?;
        let value = match challenge {
            Challenge::Basic => match &self.credential {
                Some(credential) if !credential.username.is_empty() => {
                    basic(&credential.username, &credential.password)
                }
                _ => {
                    return Err(
                        self.unauthorized("the registry wants a username and password".to_owned())
                    );
                }
            },
            Challenge::Bearer { realm, service, scope } => {
                let scope = scope
                    .clone()
                    .unwrap_or_else(|| format!("repository:{}:pull", self.name.repository));
                format!("Bearer {}", self.token(realm, service.as_deref(), &scope).await?)
            }
        };
        let mut value = HeaderValue::from_str(&value)
            .map_err(|_| self.unauthorized("the token is not a valid header value".to_owned()))?;
        value.set_sensitive(true);
        Ok(value)
    }

    /// A token from `realm` for `scope`.
    async fn token(
        &self,
        realm: &str,
        service: Option<&str>,
        scope: &str,
    ) -> Result<String, Error> {
        let mut query: Vec<(&str, &str)> = vec![("scope", scope)];
        query.extend(service.map(|service| ("service", service)));
        let bad_realm = || self.unauthorized(format!("the token realm {realm:?} is not a URL"));
        let request = match &self.credential {
            Some(credential) if credential.identity_token.is_some() => {
                let refresh = credential.identity_token.as_deref().unwrap_or_default();
                let mut form = form_urlencoded::Serializer::new(String::new());
                form.extend_pairs(&query);
                form.extend_pairs([
                    ("grant_type", "refresh_token"),
                    ("refresh_token", refresh),
                    ("client_id", "outpost"),
                ]);
                let url = Url::parse(realm).map_err(|_| bad_realm())?;
                self.http
                    .post(url)
                    .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                    .body(form.finish())
            }
            credential => {
                let url = Url::parse_with_params(realm, &query).map_err(|_| bad_realm())?;
                let request = self.http.get(url);
                match credential {
                    Some(c) if !c.username.is_empty() => {
                        request.header(header::AUTHORIZATION, basic(&c.username, &c.password))
                    }
                    _ => request,
                }
            }
        };
        let response = request.send().await.map_err(|e| self.unreachable(realm, e))?;
        let status = response.status();
        if !status.is_success() {
            return Err(self.unauthorized(format!("the token server {realm} answered {status}")));
        }
        let body = self.read_document(response, "a token").await?;
        serde_json::from_slice::<TokenResponse>(&body)
            .ok()
            .and_then(TokenResponse::token)
            .ok_or_else(|| self.unauthorized(format!("the token server {realm} sent no token")))
    }
}

fn basic(username: &str, password: &str) -> String {
    let encoded =
        base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
    format!("Basic {encoded}")
}
