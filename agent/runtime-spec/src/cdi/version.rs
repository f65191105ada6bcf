//! The CDI spec versions read (`cdiVersion`), and the version a spec's content needs, as
//! the CDI library (1.1) checks them.

use super::edits::ContainerEdits;
use super::spec::Spec;

/// The versions known, newest first. 0.1.0 and 0.2.0 are known but no spec can use them:
/// every spec needs at least [`EARLIEST`].
pub const VERSIONS: [&str; 10] =
    ["1.1.0", "1.0.0", "0.8.0", "0.7.0", "0.6.0", "0.5.0", "0.4.0", "0.3.0", "0.2.0", "0.1.0"];

/// The version every spec needs at least.
pub const EARLIEST: &str = "0.3.0";

/// Why a spec's `cdiVersion` is refused; the library's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("invalid version {0:?}")]
    Unknown(String),
    #[error("the spec version must be at least v{0}")]
    TooOld(&'static str),
}

/// Checks that `spec`'s version is known (a leading `v` allowed) and not older than
/// its content needs.
pub fn validate(spec: &Spec) -> Result<(), Error> {
    let given = spec.cdi_version.strip_prefix('v').unwrap_or(&spec.cdi_version);
    let Some(given) = VERSIONS.iter().position(|v| *v == given) else {
        return Err(Error::Unknown(spec.cdi_version.clone()));
    };
    let needed = minimum(spec);
    match VERSIONS.iter().position(|v| *v == needed) {
        Some(needed_at) if needed_at < given => Err(Error::TooOld(needed)),
        _ => Ok(()),
    }
}

/// The oldest version that has every field `spec` uses.
pub fn minimum(spec: &Spec) -> &'static str {
    let edits = || {
        std::iter::once(&spec.container_edits)
            .chain(spec.devices.iter().map(|d| &d.container_edits))
    };
    let any = |uses: fn(&ContainerEdits) -> bool| edits().any(uses);
    if any(|e| {
        !e.net_devices.is_empty()
            || e.intel_rdt.as_ref().is_some_and(|r| r.schemata.is_some() || r.enable_monitoring)
    }) {
        return "1.1.0";
    }
    // 1.0.0 and 0.8.0 changed the library, not the format.
    if any(|e| e.intel_rdt.is_some() || !e.additional_gids.is_empty()) {
        return "0.7.0";
    }
    let annotated =
        !spec.annotations.is_empty() || spec.devices.iter().any(|d| !d.annotations.is_empty());
    let dotted_class = spec.kind.split_once('/').is_some_and(|(_, class)| class.contains('.'));
    if annotated || dotted_class {
        return "0.6.0";
    }
    let digit_first = spec.devices.iter().any(|d| d.name.starts_with(|c: char| c.is_ascii_digit()));
    if digit_first || any(|e| e.device_nodes.iter().any(|n| !n.host_path.is_empty())) {
        return "0.5.0";
    }
    if any(|e| e.mounts.iter().any(|m| !m.typ.is_empty())) {
        return "0.4.0";
    }
    EARLIEST
}
