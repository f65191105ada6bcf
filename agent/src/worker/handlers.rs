//! The node's runtime handlers as the pod workers start with them (D5): the default one
//! (`--runtime`: runc, or crun) and those configured (`runtimeHandlers`), each OCI
//! runtime binary looked up on the host, as containerd's shim would run it. A binary that
//! is not there stops the start, naming the handler; a handler that cannot work on this
//! host for another reason (crun where the cgroups are hybrid, a shim not on `PATH`) is
//! said in a warning, since the node's other pods do not need it.

use std::collections::BTreeMap;
use std::path::Path;

use tracing::{info, warn};

use crate::config::values::OciRuntime;
use crate::runtime::handler::{self, Handler, Handlers, Options};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "the OCI runtime {name} is not installed (no {name} on PATH); install it (Debian: apt-get install {name}) or set runtime: runc"
    )]
    OciRuntime { name: &'static str },
    #[error(
        "crun cannot run containers on this host: its cgroups are hybrid (v1 hierarchies and a v2 one at /sys/fs/cgroup/unified) and the v2 one holds controllers ({controllers}), which crun does not support; mount those controllers as v1 hierarchies, boot with cgroup v2 only, or set runtime: runc"
    )]
    CrunHybridCgroups { controllers: String },
    #[error(
        "runtime handler {name:?}: its BinaryName {binary} is not installed (no such executable file{where_}); install it, or correct runtimeHandlers"
    )]
    HandlerBinary { name: String, binary: String, where_: &'static str },
}

/// On a hybrid host (cgroup v1 hierarchies with the v2 one at `unified`), the controllers
/// the v2 hierarchy holds.
const HYBRID_UNIFIED_CONTROLLERS: &str = "/sys/fs/cgroup/unified/cgroup.controllers";

/// The handlers the pods run with: the default one's runtime is `runtime`, `named` are
/// the configured ones; each binary given by name is replaced by its path.
pub fn handlers(runtime: OciRuntime, named: BTreeMap<String, Handler>) -> Result<Handlers, Error> {
    let hybrid =
        hybrid_controllers(std::fs::read_to_string(HYBRID_UNIFIED_CONTROLLERS).ok().as_deref());
    let default = Handler::runc(runtime_binary(runtime, hybrid.as_deref())?);
    let mut checked = BTreeMap::new();
    for (name, mut handler) in named {
        if let Options::Runc(options) = &mut handler.options
            && !options.binary_name.is_empty()
        {
            options.binary_name = installed(&name, &options.binary_name)?;
            let crun = Path::new(&options.binary_name).file_name().is_some_and(|f| f == "crun");
            if let Some(controllers) = hybrid.as_deref().filter(|_| crun) {
                warn!(
                    handler = name,
                    controllers,
                    "crun cannot run containers on this host: its cgroups are hybrid and the v2 hierarchy holds controllers; the pods of this handler will fail to start"
                );
            }
        }
        let shim = handler::shim_binary(&handler.runtime_type).unwrap_or_default();
        if !Handler::is_runc_type(&handler.runtime_type) && outpost_host::on_path(&shim).is_none() {
            warn!(
                handler = name,
                runtime_type = handler.runtime_type,
                shim,
                "the handler's shim is not on PATH; containerd must find it for the pods of this handler to start"
            );
        }
        info!(
            handler = name,
            runtime_type = handler.runtime_type,
            binary = handler.binary_name(),
            "runtime handler"
        );
        checked.insert(name, handler);
    }
    Ok(Handlers::new(default, checked))
}

/// A handler's `BinaryName` as the shim will run it: an absolute path that is an
/// executable file, or a name found on `PATH` (its path).
fn installed(name: &str, binary: &str) -> Result<String, Error> {
    let missing =
        |where_| Error::HandlerBinary { name: name.to_owned(), binary: binary.to_owned(), where_ };
    if binary.contains('/') {
        let path = Path::new(binary);
        if !path.is_absolute() {
            return Err(missing(": give an absolute path, or a name on PATH"));
        }
        return match outpost_host::in_search_path(
            &path.file_name().unwrap_or_default().to_string_lossy(),
            path.parent().unwrap_or(Path::new("/")).as_os_str(),
        ) {
            Some(_) => Ok(binary.to_owned()),
            None => Err(missing("")),
        };
    }
    let found = outpost_host::on_path(binary).ok_or_else(|| missing(" on PATH"))?;
    Ok(found.to_string_lossy().into_owned())
}

/// The default handler's runtime binary for the shim, `None` for runc (the shim's own
/// default); a runtime that is not installed, or crun where it cannot run (`hybrid`: the
/// controllers of a hybrid host's v2 hierarchy), stops the start.
fn runtime_binary(runtime: OciRuntime, hybrid: Option<&str>) -> Result<Option<String>, Error> {
    if runtime == OciRuntime::Runc {
        return Ok(None);
    }
    let name = runtime.binary();
    let path = outpost_host::on_path(name).ok_or(Error::OciRuntime { name })?;
    if let Some(controllers) = hybrid {
        return Err(Error::CrunHybridCgroups { controllers: controllers.to_owned() });
    }
    info!(runtime = name, path = %path.display(), "containers run with this OCI runtime");
    Ok(Some(path.to_string_lossy().into_owned()))
}

/// The controllers a hybrid host's v2 hierarchy holds (its `cgroup.controllers`), if any:
/// crun refuses to run containers there ("cgroups in hybrid mode not supported"), where
/// runc does.
fn hybrid_controllers(unified: Option<&str>) -> Option<String> {
    let controllers = unified?.split_whitespace().collect::<Vec<_>>().join(" ");
    (!controllers.is_empty()).then_some(controllers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crun_is_refused_only_where_the_hybrid_v2_hierarchy_holds_controllers() {
        assert_eq!(hybrid_controllers(None), None, "pure v1 or pure v2");
        assert_eq!(hybrid_controllers(Some("\n")), None, "hybrid, every controller on v1");
        assert_eq!(hybrid_controllers(Some("hugetlb\n")).as_deref(), Some("hugetlb"));
        assert_eq!(hybrid_controllers(Some("hugetlb misc\n")).as_deref(), Some("hugetlb misc"));
    }

    #[test]
    fn d5_a_handlers_binary_is_its_path_or_missing() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("wrapper");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        let given = script.to_string_lossy().into_owned();
        let error = installed("w", &given).unwrap_err().to_string();
        assert!(error.contains("its BinaryName") && error.contains("not installed"), "{error}");
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(installed("w", &given).unwrap(), given);
        let error = installed("w", "bin/runc").unwrap_err().to_string();
        assert!(error.contains("give an absolute path"), "{error}");
        let error = installed("w", "no-such-runtime-here").unwrap_err().to_string();
        assert!(error.contains("on PATH"), "{error}");
        if let Some(sh) = outpost_host::on_path("sh") {
            assert_eq!(installed("w", "sh").unwrap(), sh.to_string_lossy());
        }
    }
}
