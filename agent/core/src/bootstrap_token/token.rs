//! A bootstrap token, `ID.SECRET`, as kubeadm makes them.

use std::fmt;
use std::str::FromStr;

use super::Error;

/// Length of a token's id.
pub const ID_LEN: usize = 6;
/// Length of a token's secret.
pub const SECRET_LEN: usize = 16;

/// A bootstrap token: the public id names the Secret `bootstrap-token-<id>`, the secret
/// proves the holder knows it. `Debug` and `Display` never show the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    id: String,
    secret: String,
}

impl Token {
    /// The token from its parts, each checked as in `ID.SECRET`.
    pub fn new(id: &str, secret: &str) -> Result<Token, Error> {
        check_part("id", id, ID_LEN)?;
        check_part("secret", secret, SECRET_LEN)?;
        Ok(Token { id: id.to_owned(), secret: secret.to_owned() })
    }

    /// The public part, e.g. `abcdef`.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The secret part.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// `ID.SECRET`, what a bootstrap kubeconfig's user sends as its bearer token.
    pub fn bearer(&self) -> String {
        format!("{}.{}", self.id, self.secret)
    }
}

impl FromStr for Token {
    type Err = Error;

    fn from_str(s: &str) -> Result<Token, Error> {
        let Some((id, secret)) = s.split_once('.') else {
            return Err(Error::Token {
                reason: "there is no '.' between the id and the secret".into(),
            });
        };
        Token::new(id, secret)
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token({}.<secret>)", self.id)
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.<secret>", self.id)
    }
}

fn check_part(what: &str, part: &str, len: usize) -> Result<(), Error> {
    if let Some(bad) = part.chars().find(|c| !matches!(c, 'a'..='z' | '0'..='9')) {
        return Err(Error::Token {
            reason: format!(
                "the {what} has {bad:?}; only lowercase letters and digits may be used"
            ),
        });
    }
    if part.len() != len {
        return Err(Error::Token {
            reason: format!("the {what} has {} characters, not {len}", part.len()),
        });
    }
    Ok(())
}
