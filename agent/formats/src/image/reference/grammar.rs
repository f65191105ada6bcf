//! The distribution project's reference grammar, matched by hand: the same references
//! and the same errors as oci-spec's `Reference::try_from`, without its regular
//! expression. That expression's tag class is Unicode `\w` repeated up to 128 times;
//! compiled, it held 7.2 MB of the agent's heap for good and peaked 11 MB higher while it
//! was built (the H5 heap profile at 100 pods), which is more than the agent's pods take.
//! Only ASCII comes here ([`super::parse`] refuses the rest), where `\w` is
//! `[A-Za-z0-9_]`.
//!
//! ```text
//! reference  := name [ ":" tag ] [ "@" digest ]
//! name       := [ domain "/" ] path-component ( "/" path-component )*
//! domain     := host-component ( "." host-component )* [ ":" [0-9]+ ]
//! host-component := [a-zA-Z0-9] | [a-zA-Z0-9] [a-zA-Z0-9-]* [a-zA-Z0-9]
//! path-component := [a-z0-9]+ ( ( "." | "_" | "__" | "-"* ) [a-z0-9]+ )*
//! tag        := [A-Za-z0-9_] [A-Za-z0-9_.-]{0,127}
//! digest     := algorithm ":" [0-9a-fA-F]{32,}
//! algorithm  := [A-Za-z][A-Za-z0-9]* ( [-_+.] [A-Za-z][A-Za-z0-9]* )*
//! ```
//!
//! Then, as oci-spec does: the domain is the first component if it has a `.` or a `:` or
//! is `localhost` (else `docker.io`, where a one-component path gets `library/`);
//! `index.docker.io` is `docker.io`; the repository is at most 255 characters; a digest
//! is sha256, sha384 or sha512 of the right length.

use oci_spec::distribution::{ParseError, Reference};

const NAME_TOTAL_LENGTH_MAX: usize = 255;
const DOCKER_HUB: &str = "docker.io";
const DOCKER_HUB_LEGACY: &str = "index.docker.io";
const OFFICIAL_REPOSITORIES: &str = "library";
const DEFAULT_TAG: &str = "latest";
const TAG_MAX: usize = 128;
const DIGEST_HEX_MIN: usize = 32;

/// `reference` (ASCII) parsed as oci-spec's `Reference::try_from` parses it.
pub fn parse(reference: &str) -> Result<Reference, ParseError> {
    if reference.is_empty() {
        return Err(ParseError::NameEmpty);
    }
    // Neither a name nor a tag has an `@`; a digest has no `@` either.
    let (name_tag, digest) = match reference.split_once('@') {
        Some((name_tag, digest)) => (name_tag, Some(digest)),
        None => (reference, None),
    };
    // A tag has no `:` and no `/`: it is what follows the last `:` if no `/` follows it
    // (a `:` with a `/` after it is a registry's port).
    let (name, tag) = match name_tag.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => (name, Some(tag)),
        _ => (name_tag, None),
    };
    let valid = valid_name(name)
        && tag.is_none_or(valid_tag)
        && digest.is_none_or(|d| d.split_once(':').is_some_and(valid_digest));
    if !valid {
        return Err(ParseError::ReferenceInvalidFormat);
    }
    let (registry, repository) = split_domain(name);
    if repository.len() > NAME_TOTAL_LENGTH_MAX {
        return Err(ParseError::NameTooLong);
    }
    if let Some(digest) = digest {
        check_digest_length(digest)?;
    }
    Ok(match (tag, digest) {
        (Some(tag), Some(digest)) => {
            Reference::with_tag_and_digest(registry, repository, tag.into(), digest.into())
        }
        (None, Some(digest)) => Reference::with_digest(registry, repository, digest.into()),
        (tag, None) => Reference::with_tag(registry, repository, tag.unwrap_or(DEFAULT_TAG).into()),
    })
}

/// `[ domain "/" ] path-component ( "/" path-component )*`: the whole name as path
/// components, or a domain first and path components after it.
fn valid_name(name: &str) -> bool {
    let all_path = |s: &str| s.split('/').all(valid_path_component);
    all_path(name)
        || name.split_once('/').is_some_and(|(domain, path)| valid_domain(domain) && all_path(path))
}

/// `host-component ( "." host-component )* [ ":" [0-9]+ ]`
fn valid_domain(domain: &str) -> bool {
    let (host, port) = match domain.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (domain, None),
    };
    host.split('.').all(valid_host_component)
        && port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// `[a-zA-Z0-9]` or `[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]`
fn valid_host_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'-')
        }
        _ => false,
    }
}

/// `[a-z0-9]+ ( ( "." | "_" | "__" | "-"* ) [a-z0-9]+ )*`
fn valid_path_component(component: &str) -> bool {
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = component.as_bytes();
    if !bytes.first().is_some_and(alnum) || !bytes.last().is_some_and(alnum) {
        return false;
    }
    // Between two runs of [a-z0-9]: one of the separators.
    bytes.split(alnum).filter(|run| !run.is_empty()).all(|separator| {
        matches!(separator, b"." | b"_" | b"__") || separator.iter().all(|&b| b == b'-')
    })
}

/// `[A-Za-z0-9_] [A-Za-z0-9_.-]{0,127}`
fn valid_tag(tag: &str) -> bool {
    let word = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
    let bytes = tag.as_bytes();
    (1..=TAG_MAX).contains(&bytes.len())
        && bytes.first().is_some_and(word)
        && bytes.iter().all(|b| word(b) || matches!(b, b'.' | b'-'))
}

/// `algorithm ":" [0-9a-fA-F]{32,}`, given split at its first `:`.
fn valid_digest((algorithm, hex): (&str, &str)) -> bool {
    let component = |c: &str| {
        let bytes = c.as_bytes();
        bytes.first().is_some_and(u8::is_ascii_alphabetic)
            && bytes.iter().all(u8::is_ascii_alphanumeric)
    };
    hex.len() >= DIGEST_HEX_MIN
        && hex.bytes().all(|b| b.is_ascii_hexdigit())
        && algorithm.split(['-', '_', '+', '.']).all(component)
}

/// A digest's hex part has the length of its algorithm's sum; only sha256, sha384 and
/// sha512 are known.
fn check_digest_length(digest: &str) -> Result<(), ParseError> {
    let (algorithm, hex) = digest.split_once(':').ok_or(ParseError::DigestInvalidFormat)?;
    let length = match algorithm {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return Err(ParseError::DigestUnsupported),
    };
    if hex.len() == length { Ok(()) } else { Err(ParseError::DigestInvalidLength) }
}

/// The registry and the repository of a valid name.
fn split_domain(name: &str) -> (String, String) {
    let (domain, repository) = match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => {
            (first, rest.to_owned())
        }
        _ => (DOCKER_HUB, name.to_owned()),
    };
    let domain = if domain == DOCKER_HUB_LEGACY { DOCKER_HUB } else { domain };
    let repository = if domain == DOCKER_HUB && !repository.contains('/') {
        format!("{OFFICIAL_REPOSITORIES}/{repository}")
    } else {
        repository
    };
    (domain.to_owned(), repository)
}

#[cfg(test)]
mod tests;
