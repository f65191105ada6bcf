//! `runtimeHandlers` (the file) and `--runtime-handler NAME=BINARY` (the command line):
//! the node's runtime handlers besides the default one (D5), which RuntimeClasses name by
//! their `handler` and static pods by their `runtimeClassName`. Each is what a
//! `plugins."io.containerd.grpc.v1.cri".containerd.runtimes.<name>` table of containerd's
//! config says, with the same option names:
//!
//! ```yaml
//! runtimeHandlers:
//!   nvidia: /usr/bin/nvidia-container-runtime   # the runc shim running this binary
//!   crun:
//!     runtimeType: io.containerd.runc.v2        # the default
//!     options:
//!       BinaryName: /usr/bin/crun
//!       Root: /run/containerd/crun
//!   wasmtime:
//!     runtimeType: io.containerd.wasmtime.v1
//! ```
//!
//! The runc shim (`io.containerd.runc.v2`, `.v1`) takes `BinaryName`, `Root`,
//! `ShimCgroup`, `IoUid`, `IoGid`, `NoPivotRoot`, `NoNewKeyring`, `CriuImagePath` and
//! `CriuWorkPath`; `SystemdCgroup` follows `--cgroup-driver` (given, it must agree). Any
//! other shim takes `TypeUrl` and `ConfigPath`. The handler `runc` is the default one
//! (`--runtime` says its binary) and cannot be configured here. What is on the host (the
//! binaries) is checked when the pod workers start (`worker::start`).

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

use super::node_resources::CgroupDriver;
use crate::runtime::handler::{self, GenericOptions, Handler, Options, RuncOptions};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(
        "runtime handler {0:?}: a handler's name is a lowercase RFC 1123 label (a-z, 0-9 and \
         '-', at most 63 characters, beginning and ending with a letter or a digit), as a \
         RuntimeClass's handler must be"
    )]
    Name(String),
    #[error(
        "runtime handler \"runc\" is the node's default handler (pods without a class, and \
         classes whose handler is runc): set --runtime for the binary it runs, and give the \
         other handlers other names"
    )]
    Default,
    #[error("runtime handler {0:?} is given twice; give each handler once")]
    Twice(String),
    #[error(
        "runtime handler {name:?}: runtimeType {runtime_type:?} is not a containerd shim's \
         name; write io.containerd.<shim>.<version> (io.containerd.runc.v2, \
         io.containerd.wasmtime.v1)"
    )]
    RuntimeType { name: String, runtime_type: String },
    #[error(
        "runtime handler {name:?}: {option} is an option of the runc shim \
         (io.containerd.runc.v2), not of {runtime_type}; remove it, or set runtimeType"
    )]
    RuncOption { name: String, option: &'static str, runtime_type: String },
    #[error(
        "runtime handler {name:?}: {option} is an option of shims other than runc \
         (runtimeoptions.v1: TypeUrl, ConfigPath); remove it, or set runtimeType"
    )]
    GenericOption { name: String, option: &'static str },
    #[error(
        "runtime handler {name:?}: SystemdCgroup: {given} does not match the node's cgroup \
         driver ({driver}): the pods' cgroups follow --cgroup-driver; remove SystemdCgroup"
    )]
    SystemdCgroup { name: String, given: bool, driver: &'static str },
    #[error(
        "runtime handler {name:?}: BinaryName is empty; give the OCI runtime's path or name, \
         or remove it to run runc"
    )]
    EmptyBinary { name: String },
    #[error(
        "--runtime-handler {0:?}: expected NAME=BINARY (the runc shim running BINARY, its \
         BinaryName)"
    )]
    Flag(String),
}

/// The handlers as given, by name: one `--runtime-handler` flag's, or the file's map.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct HandlerSettings(pub BTreeMap<String, HandlerSetting>);

impl FromStr for HandlerSettings {
    type Err = Error;
    fn from_str(raw: &str) -> Result<HandlerSettings, Error> {
        match raw.split_once('=') {
            Some((name, binary)) if !name.trim().is_empty() && !binary.trim().is_empty() => {
                let setting = HandlerSetting::Binary(binary.trim().to_owned());
                Ok(HandlerSettings(BTreeMap::from([(name.trim().to_owned(), setting)])))
            }
            _ => Err(Error::Flag(raw.to_owned())),
        }
    }
}

/// One handler as written: its `BinaryName` alone (the runc shim), or in full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandlerSetting {
    Binary(String),
    Full(FullSetting),
}

/// A handler in full: its shim and options.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FullSetting {
    /// containerd's name of the shim (default `io.containerd.runc.v2`).
    pub runtime_type: Option<String>,
    pub options: Option<OptionSettings>,
}

/// A handler's options, spelled as in containerd's config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptionSettings {
    #[serde(rename = "BinaryName")]
    pub binary_name: Option<String>,
    #[serde(rename = "Root")]
    pub root: Option<String>,
    #[serde(rename = "ShimCgroup")]
    pub shim_cgroup: Option<String>,
    #[serde(rename = "IoUid")]
    pub io_uid: Option<u32>,
    #[serde(rename = "IoGid")]
    pub io_gid: Option<u32>,
    #[serde(rename = "NoPivotRoot")]
    pub no_pivot_root: Option<bool>,
    #[serde(rename = "NoNewKeyring")]
    pub no_new_keyring: Option<bool>,
    #[serde(rename = "CriuImagePath")]
    pub criu_image_path: Option<String>,
    #[serde(rename = "CriuWorkPath")]
    pub criu_work_path: Option<String>,
    #[serde(rename = "SystemdCgroup")]
    pub systemd_cgroup: Option<bool>,
    #[serde(rename = "TypeUrl")]
    pub type_url: Option<String>,
    #[serde(rename = "ConfigPath")]
    pub config_path: Option<String>,
}

impl<'de> Deserialize<'de> for HandlerSetting {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<HandlerSetting, D::Error> {
        struct Either;
        impl<'de> Visitor<'de> for Either {
            type Value = HandlerSetting;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("the OCI runtime's path, or a map of runtimeType and options")
            }
            fn visit_str<E: de::Error>(self, binary: &str) -> Result<HandlerSetting, E> {
                Ok(HandlerSetting::Binary(binary.to_owned()))
            }
            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<HandlerSetting, M::Error> {
                let full = FullSetting::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(HandlerSetting::Full(full))
            }
        }
        d.deserialize_any(Either)
    }
}

/// The handlers `given` (each flag's, or the file's), checked; `driver` is the node's
/// cgroup driver, which `SystemdCgroup` must agree with.
pub fn resolve(
    given: Vec<HandlerSettings>,
    driver: CgroupDriver,
) -> Result<BTreeMap<String, Handler>, Error> {
    let mut handlers = BTreeMap::new();
    for (name, setting) in given.into_iter().flat_map(|settings| settings.0) {
        let handler = one(&name, setting, driver)?;
        if handlers.insert(name.clone(), handler).is_some() {
            return Err(Error::Twice(name));
        }
    }
    Ok(handlers)
}

/// One handler, checked.
fn one(name: &str, setting: HandlerSetting, driver: CgroupDriver) -> Result<Handler, Error> {
    if name == outpost_core::runtime_class::DEFAULT_HANDLER {
        return Err(Error::Default);
    }
    if !is_label(name) {
        return Err(Error::Name(name.to_owned()));
    }
    let full = match setting {
        HandlerSetting::Binary(binary) => FullSetting {
            runtime_type: None,
            options: Some(OptionSettings {
                binary_name: Some(binary),
                ..OptionSettings::default()
            }),
        },
        HandlerSetting::Full(full) => full,
    };
    let runtime_type = full.runtime_type.unwrap_or_else(|| handler::RUNC_V2.to_owned());
    if handler::shim_binary(&runtime_type).is_none() {
        return Err(Error::RuntimeType { name: name.to_owned(), runtime_type });
    }
    let given = full.options.unwrap_or_default();
    let options = if Handler::is_runc_type(&runtime_type) {
        Options::Runc(runc_options(name, given, driver)?)
    } else {
        Options::Generic(generic_options(name, given, &runtime_type)?)
    };
    Ok(Handler { runtime_type, options })
}

fn runc_options(
    name: &str,
    given: OptionSettings,
    driver: CgroupDriver,
) -> Result<RuncOptions, Error> {
    let generic =
        [("TypeUrl", given.type_url.is_some()), ("ConfigPath", given.config_path.is_some())];
    if let Some((option, _)) = generic.into_iter().find(|(_, set)| *set) {
        return Err(Error::GenericOption { name: name.to_owned(), option });
    }
    let systemd = driver == CgroupDriver::Systemd;
    if let Some(given) = given.systemd_cgroup.filter(|given| *given != systemd) {
        let driver = if systemd { "systemd" } else { "cgroupfs" };
        return Err(Error::SystemdCgroup { name: name.to_owned(), given, driver });
    }
    if given.binary_name.as_deref().is_some_and(|b| b.trim().is_empty()) {
        return Err(Error::EmptyBinary { name: name.to_owned() });
    }
    Ok(RuncOptions {
        no_pivot_root: given.no_pivot_root.unwrap_or(false),
        no_new_keyring: given.no_new_keyring.unwrap_or(false),
        shim_cgroup: given.shim_cgroup.unwrap_or_default(),
        io_uid: given.io_uid.unwrap_or(0),
        io_gid: given.io_gid.unwrap_or(0),
        binary_name: given.binary_name.unwrap_or_default(),
        root: given.root.unwrap_or_default(),
        systemd_cgroup: false,
        criu_image_path: given.criu_image_path.unwrap_or_default(),
        criu_work_path: given.criu_work_path.unwrap_or_default(),
    })
}

fn generic_options(
    name: &str,
    given: OptionSettings,
    runtime_type: &str,
) -> Result<GenericOptions, Error> {
    let runc = [
        ("BinaryName", given.binary_name.is_some()),
        ("Root", given.root.is_some()),
        ("ShimCgroup", given.shim_cgroup.is_some()),
        ("IoUid", given.io_uid.is_some()),
        ("IoGid", given.io_gid.is_some()),
        ("NoPivotRoot", given.no_pivot_root.is_some()),
        ("NoNewKeyring", given.no_new_keyring.is_some()),
        ("CriuImagePath", given.criu_image_path.is_some()),
        ("CriuWorkPath", given.criu_work_path.is_some()),
        ("SystemdCgroup", given.systemd_cgroup.is_some()),
    ];
    if let Some((option, _)) = runc.into_iter().find(|(_, set)| *set) {
        let (name, runtime_type) = (name.to_owned(), runtime_type.to_owned());
        return Err(Error::RuncOption { name, option, runtime_type });
    }
    Ok(GenericOptions {
        type_url: given.type_url.unwrap_or_default(),
        config_path: given.config_path.unwrap_or_default(),
    })
}

/// An RFC 1123 label: what the API server takes as a RuntimeClass's `handler`.
fn is_label(name: &str) -> bool {
    let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| alphanumeric(c) || c == '-')
        && name.starts_with(alphanumeric)
        && name.ends_with(alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_file(yaml: &str) -> Result<BTreeMap<String, Handler>, String> {
        let settings = crate::config::Settings::from_yaml(yaml).map_err(|e| e.to_string())?;
        resolve(settings.runtime_handler, CgroupDriver::Cgroupfs).map_err(|e| e.to_string())
    }

    fn binary(handler: &Handler) -> Option<&str> {
        handler.binary_name()
    }

    #[test]
    fn d5_handlers_are_given_by_binary_or_in_full() {
        let handlers = from_file(
            "runtimeHandlers:\n  nvidia: /usr/bin/nvidia-container-runtime\n  crun:\n    \
             runtimeType: io.containerd.runc.v2\n    options:\n      BinaryName: /usr/bin/crun\n      \
             Root: /run/crun\n      NoPivotRoot: true\n  wasmtime:\n    runtimeType: \
             io.containerd.wasmtime.v1\n  kata:\n    runtimeType: io.containerd.kata.v2\n    \
             options:\n      ConfigPath: /etc/kata/configuration.toml\n",
        )
        .unwrap();
        assert_eq!(binary(&handlers["nvidia"]), Some("/usr/bin/nvidia-container-runtime"));
        assert_eq!(handlers["nvidia"].runtime_type, "io.containerd.runc.v2");
        let Options::Runc(crun) = &handlers["crun"].options else { panic!("runc options") };
        assert_eq!((crun.binary_name.as_str(), crun.root.as_str()), ("/usr/bin/crun", "/run/crun"));
        assert!(crun.no_pivot_root);
        assert_eq!(handlers["wasmtime"].runtime_type, "io.containerd.wasmtime.v1");
        assert_eq!(handlers["wasmtime"].options, Options::Generic(GenericOptions::default()));
        let Options::Generic(kata) = &handlers["kata"].options else { panic!("generic options") };
        assert_eq!(kata.config_path, "/etc/kata/configuration.toml");
    }

    #[test]
    fn d5_a_flag_is_a_binary_handler() {
        let flags = ["nvidia=/usr/bin/nvidia-container-runtime", "crun=crun"]
            .map(|f| f.parse::<HandlerSettings>().unwrap());
        let handlers = resolve(flags.to_vec(), CgroupDriver::Cgroupfs).unwrap();
        assert_eq!(binary(&handlers["crun"]), Some("crun"));
        assert_eq!(binary(&handlers["nvidia"]), Some("/usr/bin/nvidia-container-runtime"));
        for bad in ["nvidia", "=x", "nvidia="] {
            let error = bad.parse::<HandlerSettings>().unwrap_err().to_string();
            assert!(error.contains("expected NAME=BINARY"), "{bad}: {error}");
        }
        let twice = ["a=/x", "a=/y"].map(|f| f.parse::<HandlerSettings>().unwrap());
        let error = resolve(twice.to_vec(), CgroupDriver::Cgroupfs).unwrap_err();
        assert_eq!(error, Error::Twice("a".into()));
    }

    #[test]
    fn d5_what_containerd_would_not_take_is_refused_with_why() {
        for (yaml, expected) in [
            ("runc: /usr/bin/crun", "\"runc\" is the node's default handler"),
            ("Nvidia: /x", "a handler's name is a lowercase RFC 1123 label"),
            ("-gpu: /x", "RFC 1123 label"),
            ("gpu: {runtimeType: wasmtime}", "not a containerd shim's name"),
            ("gpu: {options: {BinaryName: \"\"}}", "BinaryName is empty"),
            (
                "gpu: {options: {ConfigPath: /x}}",
                "ConfigPath is an option of shims other than runc",
            ),
            (
                "w: {runtimeType: io.containerd.wasmtime.v1, options: {BinaryName: /x}}",
                "BinaryName is an option of the runc shim (io.containerd.runc.v2), not of \
                 io.containerd.wasmtime.v1",
            ),
            (
                "gpu: {options: {SystemdCgroup: true}}",
                "does not match the node's cgroup driver (cgroupfs)",
            ),
            ("gpu: {options: {Binary: /x}}", "unknown field"),
            ("gpu: {runtime: x}", "unknown field"),
            ("gpu: 3", "the OCI runtime's path, or a map"),
        ] {
            let error = from_file(&format!("runtimeHandlers:\n  {yaml}\n")).unwrap_err();
            assert!(error.contains(expected), "{yaml}: {error}");
        }
        let agreeing = "runtimeHandlers:\n  gpu: {options: {SystemdCgroup: false}}\n";
        assert!(from_file(agreeing).is_ok(), "SystemdCgroup agreeing with the driver");
        let settings = crate::config::Settings::from_yaml(
            "runtimeHandlers:\n  gpu: {options: {SystemdCgroup: true}}\n",
        )
        .unwrap();
        assert!(resolve(settings.runtime_handler, CgroupDriver::Systemd).is_ok());
    }
}
