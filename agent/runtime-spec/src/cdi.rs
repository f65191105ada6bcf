//! CDI, the Container Device Interface (D3): the devices named for a container
//! (`vendor.com/class=name`, from a device plugin's `Allocate` answer and the
//! `cdi.k8s.io/` annotations) looked up in the CDI spec files of the spec directories
//! (`/etc/cdi`, `/var/run/cdi`), and their edits applied to the container's OCI spec as
//! containerd's CRI plugin applies them through the CDI library
//! (`tags.cncf.io/container-device-interface` 1.1): the same names, files, priorities,
//! checks, order and wording, written anew here.
//!
//! - `name`: qualified names and the `kind`'s vendor and class.
//! - `spec`, `edits`, `version`: a spec file's format and its checks.
//! - `registry`: the files' devices, their priorities and conflicts; names resolved to
//!   edits.
//! - `annotations`: the names a container asks for.
//! - `apply`: the edits applied to an OCI spec.
//!
//! Pure: the caller reads the directories and the files, and answers for the host's
//! device nodes ([`HostLookup`]).
//!
//! Not as the library: JSON (a file that starts with `{`) is read as JSON, not as YAML;
//! field names are matched exactly (Go's decoder ignores case); annotations are read in
//! key order (containerd reads a Go map, in no set order); a device node's permissions
//! may not be `none` (not in the library's 1.1 release).

pub mod annotations;
pub mod apply;
pub mod edits;
pub mod name;
pub mod registry;
pub mod spec;
pub mod version;

#[cfg(test)]
mod tests;

pub use self::annotations::{ANNOTATION_PREFIX, annotation_devices, requested};
pub use self::apply::{HostDevice, HostDeviceType, HostLookup, apply};
pub use self::edits::ContainerEdits;
pub use self::name::{QualifiedName, parse_qualified_name};
pub use self::registry::{Registry, SpecFile, Unresolved};
pub use self::spec::Spec;

/// Why devices cannot be injected; containerd's words.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("CDI device injection failed: {0}")]
    Unresolved(#[source] Unresolved),
    #[error("CDI device injection failed: failed to inject devices: {0}")]
    Apply(#[source] apply::Error),
}

/// Injects `devices` into `spec` (the library's `InjectDevices`): every name resolved
/// in `registry`, else none is applied; then their edits, merged, applied at once.
pub fn inject(
    spec: &mut oci_spec::runtime::Spec,
    registry: &Registry,
    devices: &[String],
    host: &mut HostLookup<'_>,
) -> Result<(), Error> {
    let edits = registry.resolve(devices).map_err(Error::Unresolved)?;
    apply(spec, &edits, host).map_err(Error::Apply)
}
