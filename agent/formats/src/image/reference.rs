//! Image references normalized as containerd and docker name them:
//! `busybox` → `docker.io/library/busybox:latest`. No IO.

/// A reference that is not a valid image reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid image reference {reference:?}: {reason}")]
pub struct InvalidReference {
    pub reference: String,
    pub reason: &'static str,
}

const DEFAULT_DOMAIN: &str = "docker.io";
const OFFICIAL_PREFIX: &str = "library/";

/// The fully qualified form of `reference`: a registry domain (default `docker.io`, where
/// a one-component name gets `library/`), and a tag (default `latest`) unless a digest
/// pins it.
pub fn normalize(reference: &str) -> Result<String, InvalidReference> {
    let invalid = |reason| InvalidReference { reference: reference.to_owned(), reason };
    let (name_tag, digest) = match reference.split_once('@') {
        Some((name_tag, digest)) => (name_tag, Some(digest)),
        None => (reference, None),
    };
    if let Some(digest) = digest
        && !valid_digest(digest)
    {
        return Err(invalid("the digest is not algorithm:hex"));
    }
    let last_slash = name_tag.rfind('/');
    let (name, tag) = match name_tag.rfind(':') {
        Some(colon) if last_slash.is_none_or(|slash| colon > slash) => {
            (&name_tag[..colon], Some(&name_tag[colon + 1..]))
        }
        _ => (name_tag, None),
    };
    if let Some(tag) = tag
        && !valid_tag(tag)
    {
        return Err(invalid("the tag must be 1-128 of [A-Za-z0-9_.-], not starting with . or -"));
    }
    let (domain, path) = match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.bytes().any(|b| b.is_ascii_uppercase()) =>
        {
            (first, rest.to_owned())
        }
        _ => (DEFAULT_DOMAIN, name.to_owned()),
    };
    let domain = if domain == "index.docker.io" { DEFAULT_DOMAIN } else { domain };
    if domain.is_empty()
        || !domain.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b))
    {
        return Err(invalid("the registry domain is not a host[:port]"));
    }
    if path.is_empty() || !path.split('/').all(valid_path_component) {
        return Err(invalid(
            "the repository must be lowercase components of [a-z0-9] joined by '.', '_', '__' or '-', separated by '/'",
        ));
    }
    let path = if domain == DEFAULT_DOMAIN && !path.contains('/') {
        format!("{OFFICIAL_PREFIX}{path}")
    } else {
        path
    };
    let mut out = format!("{domain}/{path}");
    match (tag, digest) {
        (None, None) => out.push_str(":latest"),
        (tag, digest) => {
            if let Some(tag) = tag {
                out.push(':');
                out.push_str(tag);
            }
            if let Some(digest) = digest {
                out.push('@');
                out.push_str(digest);
            }
        }
    }
    Ok(out)
}

/// Whether an OCI `org.opencontainers.image.ref.name` names an image, rather than being
/// just a tag of an image whose name the layout does not say (`latest`, `1.36`).
pub fn is_full_reference(ref_name: &str) -> bool {
    ref_name.contains(['/', ':', '@'])
}

fn valid_tag(tag: &str) -> bool {
    let bytes = tag.as_bytes();
    (1..=128).contains(&bytes.len())
        && (bytes[0].is_ascii_alphanumeric() || bytes[0] == b'_')
        && bytes.iter().all(|&b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

fn valid_digest(digest: &str) -> bool {
    digest.split_once(':').is_some_and(|(algorithm, hex)| {
        !algorithm.is_empty()
            && algorithm
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+._-".contains(&b))
            && hex.len() >= 32
            && hex.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`
fn valid_path_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let mut i = 0;
    loop {
        let start = i;
        while i < bytes.len() && alnum(bytes[i]) {
            i += 1;
        }
        if i == start {
            return false;
        }
        if i == bytes.len() {
            return true;
        }
        let separator = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        match &component[separator..i] {
            "." | "_" | "__" => {}
            dashes if dashes.bytes().all(|b| b == b'-') => {}
            _ => return false,
        }
    }
}
