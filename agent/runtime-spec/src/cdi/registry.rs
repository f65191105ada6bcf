//! The devices of the spec files found in the spec directories, as the CDI library's
//! cache holds them, and the names of a container's devices resolved to the edits to
//! apply (its `InjectDevices`).
//!
//! Each file is parsed and checked on its own: a file that is refused is left out (its
//! error kept for the logs), and the others' devices stay usable. A device is known by
//! its qualified name. When two files define it, the one in the later directory wins
//! (directories are given in priority order, lowest first); two files of the same
//! directory that define it make it unusable, even if a later directory defines it too.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::PathBuf;

use super::edits::ContainerEdits;
use super::name::QualifiedName;
use super::spec::{self, Spec};

/// A spec file's content, as read.
#[derive(Debug, Clone)]
pub struct SpecFile {
    pub path: PathBuf,
    /// The index of its directory among the spec directories (the later, the higher).
    pub priority: usize,
    pub data: Vec<u8>,
}

/// Why a spec file, or a device of it, is left out.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("failed to parse CDI Spec {path:?}: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: spec::Error,
    },
    #[error("CDI Spec {path:?}: {source}")]
    Invalid {
        path: PathBuf,
        #[source]
        source: spec::Error,
    },
    #[error("conflicting device {device:?} (specs {path:?}, {other:?})")]
    Conflict { device: String, path: PathBuf, other: PathBuf },
}

/// Devices that are not known (no valid spec defines them, or two conflict).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unresolvable CDI devices {}", .0.join(", "))]
pub struct Unresolved(pub Vec<String>);

/// The known devices of a set of spec files.
#[derive(Debug, Default)]
pub struct Registry {
    /// The valid specs, in the order read.
    specs: Vec<Loaded>,
    /// Each usable device: its spec (an index into `specs`) and its index there.
    devices: BTreeMap<String, (usize, usize)>,
    errors: Vec<Error>,
}

#[derive(Debug)]
struct Loaded {
    path: PathBuf,
    priority: usize,
    spec: Spec,
}

impl Registry {
    /// The registry of `files`, in the order the directories were read (by directory,
    /// then by file name).
    pub fn new(files: impl IntoIterator<Item = SpecFile>) -> Registry {
        let mut registry = Registry::default();
        let mut conflicts = HashSet::new();
        for SpecFile { path, priority, data } in files {
            let spec = match Spec::parse(&data) {
                Ok(spec) => spec,
                Err(source) => {
                    registry.errors.push(Error::Parse { path, source });
                    continue;
                }
            };
            if let Err(source) = spec.validate() {
                registry.errors.push(Error::Invalid { path, source });
                continue;
            }
            let at = registry.specs.len();
            let (vendor, class) = spec.vendor_class();
            for (index, device) in spec.devices.iter().enumerate() {
                let qualified = QualifiedName { vendor, class, name: &device.name }.to_string();
                if let Some(&(other, _)) = registry.devices.get(&qualified) {
                    let other = &registry.specs[other];
                    if priority < other.priority {
                        continue;
                    }
                    if priority == other.priority {
                        registry.errors.push(Error::Conflict {
                            device: qualified.clone(),
                            path: path.clone(),
                            other: other.path.clone(),
                        });
                        conflicts.insert(qualified);
                        continue;
                    }
                }
                registry.devices.insert(qualified, (at, index));
            }
            registry.specs.push(Loaded { path, priority, spec });
        }
        for conflict in conflicts {
            registry.devices.remove(&conflict);
        }
        registry
    }

    /// The qualified names of the usable devices, sorted.
    pub fn device_names(&self) -> impl Iterator<Item = &str> {
        self.devices.keys().map(String::as_str)
    }

    /// Why files or devices were left out.
    pub fn errors(&self) -> &[Error] {
        &self.errors
    }

    /// The edits for `devices`, in order: each device's, after its spec's own the first
    /// time one of that spec's devices comes (a device named twice has its edits twice).
    /// Every name that is not a usable device, if any.
    pub fn resolve(&self, devices: &[String]) -> Result<ContainerEdits, Unresolved> {
        let mut edits = ContainerEdits::default();
        let mut specs_seen = BTreeSet::new();
        let mut unresolved = Vec::new();
        for name in devices {
            let Some(&(spec, index)) = self.devices.get(name) else {
                unresolved.push(name.clone());
                continue;
            };
            let first = specs_seen.insert(spec);
            let spec = &self.specs[spec].spec;
            if first {
                edits.append(&spec.container_edits);
            }
            edits.append(&spec.devices[index].container_edits);
        }
        if unresolved.is_empty() { Ok(edits) } else { Err(Unresolved(unresolved)) }
    }
}

#[cfg(test)]
mod tests;
