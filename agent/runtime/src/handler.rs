//! Runtime handlers (D5): what containerd's CRI keeps in its
//! `plugins."io.containerd.grpc.v1.cri".containerd.runtimes.<name>` tables, as the node
//! configures them. A handler is a shim (its `runtime_type`, containerd's name for it,
//! `io.containerd.runc.v2` unless said) and the options it is given; a pod's sandbox
//! and containers are made with the handler its RuntimeClass names (containerd's
//! container record carries the shim's name and options, so everything done to the
//! container later, its task, `exec`, probes, goes through the same shim and runtime).
//!
//! The runc shim (`io.containerd.runc.v1` and `.v2`) takes `containerd.runc.v1.Options`
//! ([`RuncOptions`]: `BinaryName`, `Root`, ...), any other shim
//! `runtimeoptions.v1.Options` (`TypeUrl`, `ConfigPath`), as containerd's CRI encodes
//! them. The default handler serves pods without a class and the class `runc`.

use std::collections::BTreeMap;

use containerd_client::services::v1::container::Runtime;

/// containerd's runc shim, the default handler's.
pub const RUNC_V2: &str = "io.containerd.runc.v2";
/// The runc shim's older name, which takes the same options.
pub const RUNC_V1: &str = "io.containerd.runc.v1";

/// The type URL of the runc shim's options.
const RUNC_OPTIONS_TYPE_URL: &str = "containerd.runc.v1.Options";
/// The type URL of any other shim's options.
const GENERIC_OPTIONS_TYPE_URL: &str = "runtimeoptions.v1.Options";

/// The runc shim's options (`containerd.runc.v1.Options`), every field containerd 1.6
/// reads. `SystemdCgroup` is the node's cgroup driver's, never a handler's own.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct RuncOptions {
    /// `NoPivotRoot`: runc's `--no-pivot`.
    #[prost(bool, tag = "1")]
    pub no_pivot_root: bool,
    /// `NoNewKeyring`: runc's `--no-new-keyring`.
    #[prost(bool, tag = "2")]
    pub no_new_keyring: bool,
    /// `ShimCgroup`: the cgroup the shim is put in.
    #[prost(string, tag = "3")]
    pub shim_cgroup: String,
    /// `IoUid`, `IoGid`: the owner of the task's I/O pipes.
    #[prost(uint32, tag = "4")]
    pub io_uid: u32,
    #[prost(uint32, tag = "5")]
    pub io_gid: u32,
    /// `BinaryName`: the OCI runtime the shim runs instead of `runc`.
    #[prost(string, tag = "6")]
    pub binary_name: String,
    /// `Root`: the OCI runtime's state directory (`--root`).
    #[prost(string, tag = "7")]
    pub root: String,
    #[prost(bool, tag = "9")]
    pub systemd_cgroup: bool,
    /// `CriuImagePath`, `CriuWorkPath`: checkpoints' directories.
    #[prost(string, tag = "10")]
    pub criu_image_path: String,
    #[prost(string, tag = "11")]
    pub criu_work_path: String,
}

impl RuncOptions {
    /// The runc shim's options in a container record's `runtime` (the defaults when it
    /// gives none); `None` when another shim runs the container, or its options are not
    /// the runc shim's.
    pub fn of(runtime: &Runtime) -> Option<RuncOptions> {
        if !Handler::is_runc_type(&runtime.name) {
            return None;
        }
        match &runtime.options {
            None => Some(RuncOptions::default()),
            Some(any) if any.type_url.ends_with(RUNC_OPTIONS_TYPE_URL) => {
                <RuncOptions as prost::Message>::decode(any.value.as_slice()).ok()
            }
            Some(_) => None,
        }
    }
}

/// Any other shim's options (`runtimeoptions.v1.Options`).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct GenericOptions {
    /// `TypeUrl`: the type of the file at `ConfigPath`.
    #[prost(string, tag = "1")]
    pub type_url: String,
    /// `ConfigPath`: the shim's configuration file.
    #[prost(string, tag = "2")]
    pub config_path: String,
}

/// A handler's options, by the kind of shim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Options {
    Runc(RuncOptions),
    Generic(GenericOptions),
}

/// One runtime handler: a shim and its options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handler {
    /// containerd's name of the shim (`io.containerd.runc.v2`, `io.containerd.wasmtime.v1`).
    pub runtime_type: String,
    pub options: Options,
}

impl Handler {
    /// The runc shim running `binary_name` (`None`: runc itself).
    pub fn runc(binary_name: Option<String>) -> Handler {
        let options =
            RuncOptions { binary_name: binary_name.unwrap_or_default(), ..RuncOptions::default() };
        Handler { runtime_type: RUNC_V2.to_owned(), options: Options::Runc(options) }
    }

    /// Whether `runtime_type` is the runc shim's, whose options are [`RuncOptions`].
    pub fn is_runc_type(runtime_type: &str) -> bool {
        matches!(runtime_type, RUNC_V1 | RUNC_V2)
    }

    /// The OCI runtime binary the runc shim runs (`None`: runc, or another shim).
    pub fn binary_name(&self) -> Option<&str> {
        match &self.options {
            Options::Runc(runc) if !runc.binary_name.is_empty() => Some(&runc.binary_name),
            _ => None,
        }
    }

    /// What containerd's container record says of its runtime: the shim, and its options
    /// (none when all are defaults, as containerd's CRI leaves them). `systemd_cgroup`
    /// is the node's cgroup driver's (`--cgroup-driver systemd`), for the runc shim.
    pub fn runtime(&self, systemd_cgroup: bool) -> Runtime {
        let options = match &self.options {
            Options::Runc(runc) => {
                let options = RuncOptions { systemd_cgroup, ..runc.clone() };
                (options != RuncOptions::default()).then(|| any(RUNC_OPTIONS_TYPE_URL, &options))
            }
            Options::Generic(generic) => (*generic != GenericOptions::default())
                .then(|| any(GENERIC_OPTIONS_TYPE_URL, generic)),
        };
        Runtime { name: self.runtime_type.clone(), options }
    }
}

fn any(type_url: &str, message: &impl prost::Message) -> prost_types::Any {
    prost_types::Any { type_url: type_url.to_owned(), value: message.encode_to_vec() }
}

/// containerd's binary of a shim (`io.containerd.wasmtime.v1`: `containerd-shim-wasmtime-v1`),
/// as containerd derives it from the name's last two parts; `None` for a name without them.
pub fn shim_binary(runtime_type: &str) -> Option<String> {
    let mut parts = runtime_type.rsplit('.');
    let (version, name) = (parts.next()?, parts.next()?);
    let valid = |part: &str| !part.is_empty() && !part.contains('/');
    (valid(version) && valid(name)).then(|| format!("containerd-shim-{name}-{version}"))
}

/// The node's handlers: the default one, and those configured by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handlers {
    default: Handler,
    named: BTreeMap<String, Handler>,
}

impl Default for Handlers {
    /// runc alone.
    fn default() -> Handlers {
        Handlers::new(Handler::runc(None), BTreeMap::new())
    }
}

impl Handlers {
    pub fn new(default: Handler, named: BTreeMap<String, Handler>) -> Handlers {
        Handlers { default, named }
    }

    /// The handler of `name` (`None`: the default one).
    pub fn get(&self, name: Option<&str>) -> Option<&Handler> {
        match name {
            None => Some(&self.default),
            Some(name) => self.named.get(name),
        }
    }

    /// Whether the node has a handler called `name` besides the default one.
    pub fn has(&self, name: &str) -> bool {
        self.named.contains_key(name)
    }

    pub fn default_handler(&self) -> &Handler {
        &self.default
    }

    /// The handlers configured by name.
    pub fn named(&self) -> &BTreeMap<String, Handler> {
        &self.named
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runc shim's `Options` as containerd's api declares them.
    #[derive(Clone, PartialEq, prost::Message)]
    struct Declared {
        #[prost(bool, tag = "1")]
        no_pivot_root: bool,
        #[prost(string, tag = "3")]
        shim_cgroup: String,
        #[prost(uint32, tag = "4")]
        io_uid: u32,
        #[prost(string, tag = "6")]
        binary_name: String,
        #[prost(string, tag = "7")]
        root: String,
        #[prost(bool, tag = "9")]
        systemd_cgroup: bool,
    }

    fn decode(runtime: &Runtime) -> Declared {
        let any = runtime.options.as_ref().unwrap();
        assert_eq!(any.type_url, "containerd.runc.v1.Options");
        <Declared as prost::Message>::decode(any.value.as_slice()).unwrap()
    }

    #[test]
    fn d5_the_runc_shims_options_are_containerds() {
        let runc = Handler::runc(None).runtime(false);
        assert_eq!((runc.name.as_str(), runc.options), ("io.containerd.runc.v2", None));
        let systemd = decode(&Handler::runc(None).runtime(true));
        assert_eq!(systemd, Declared { systemd_cgroup: true, ..Declared::default() });
        let crun = decode(&Handler::runc(Some("/usr/bin/crun".into())).runtime(false));
        assert_eq!(crun, Declared { binary_name: "/usr/bin/crun".into(), ..Declared::default() });
        let options = RuncOptions {
            binary_name: "/usr/bin/nvidia-container-runtime".into(),
            root: "/run/nvidia".into(),
            no_pivot_root: true,
            io_uid: 1000,
            shim_cgroup: "/shims".into(),
            ..RuncOptions::default()
        };
        let nvidia = Handler { runtime_type: RUNC_V2.into(), options: Options::Runc(options) };
        let declared = decode(&nvidia.runtime(true));
        assert_eq!(
            declared,
            Declared {
                no_pivot_root: true,
                shim_cgroup: "/shims".into(),
                io_uid: 1000,
                binary_name: "/usr/bin/nvidia-container-runtime".into(),
                root: "/run/nvidia".into(),
                systemd_cgroup: true,
            }
        );
    }

    #[test]
    fn d5_other_shims_get_generic_options_or_none() {
        let generic = |type_url: &str, config_path: &str| Handler {
            runtime_type: "io.containerd.kata.v2".into(),
            options: Options::Generic(GenericOptions {
                type_url: type_url.into(),
                config_path: config_path.into(),
            }),
        };
        let none = generic("", "").runtime(true);
        assert_eq!((none.name.as_str(), none.options), ("io.containerd.kata.v2", None));
        let kata = generic("", "/etc/kata/configuration.toml").runtime(false);
        let any = kata.options.unwrap();
        assert_eq!(any.type_url, "runtimeoptions.v1.Options");
        let decoded = <GenericOptions as prost::Message>::decode(any.value.as_slice()).unwrap();
        assert_eq!(decoded.config_path, "/etc/kata/configuration.toml");
    }

    #[test]
    fn d5_a_shims_binary_is_named_as_containerd_names_it() {
        assert_eq!(
            shim_binary("io.containerd.runc.v2").as_deref(),
            Some("containerd-shim-runc-v2")
        );
        assert_eq!(
            shim_binary("io.containerd.wasmtime.v1").as_deref(),
            Some("containerd-shim-wasmtime-v1")
        );
        assert_eq!(shim_binary("runc"), None);
        assert_eq!(shim_binary("io.containerd..v1"), None);
        assert_eq!(shim_binary("a/b.v1"), None);
    }

    #[test]
    fn d5_the_default_handler_is_named_by_none() {
        let crun = Handler::runc(Some("/usr/bin/crun".into()));
        let handlers =
            Handlers::new(Handler::runc(None), BTreeMap::from([("crun".into(), crun.clone())]));
        assert_eq!(handlers.get(None), Some(&Handler::runc(None)));
        assert_eq!(handlers.get(Some("crun")), Some(&crun));
        assert_eq!(handlers.get(Some("kata")), None);
        assert!(handlers.has("crun") && !handlers.has("runc"));
    }
}
