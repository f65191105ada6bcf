//! Image references normalized as containerd and docker name them:
//! `busybox` → `docker.io/library/busybox:latest`, as oci-spec's distribution
//! [`Reference`] (the grammar of the distribution project), matched without its regular
//! expression ([`grammar`]). No IO.

mod grammar;

pub use oci_spec::distribution::{ParseError, Reference};

/// A reference that is not a valid image reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid image reference {reference:?}: {reason}")]
pub struct InvalidReference {
    pub reference: String,
    /// What the grammar refused (a name that is not lowercase components, a tag or digest
    /// out of form).
    pub reason: String,
}

/// `reference` taken apart: a registry domain (default `docker.io`, where a one-component
/// name gets `library/`), the repository, and a tag (default `latest`) unless a digest
/// pins it.
///
/// The reference must be ASCII: the grammar's tag class (`\w`) would otherwise take any
/// Unicode letter, which no registry serves.
pub fn parse(reference: &str) -> Result<Reference, InvalidReference> {
    let invalid = |reason: String| InvalidReference { reference: reference.to_owned(), reason };
    if !reference.is_ascii() {
        return Err(invalid("it is not ASCII".to_owned()));
    }
    grammar::parse(reference).map_err(|error: ParseError| invalid(error.to_string()))
}

/// The fully qualified form of `reference` ([`parse`]d and written whole).
pub fn normalize(reference: &str) -> Result<String, InvalidReference> {
    parse(reference).map(|parsed| parsed.whole())
}

/// Whether an OCI `org.opencontainers.image.ref.name` names an image, rather than being
/// just a tag of an image whose name the layout does not say (`latest`, `1.36`).
pub fn is_full_reference(ref_name: &str) -> bool {
    ref_name.contains(['/', ':', '@'])
}
