//! What the agent reads about its host from the kernel, below the agent and the runtime:
//! the agent's sources, BPF, audit and metrics, and `outpost-runtime`, may all import it;
//! it imports nothing of Outpost's but `outpost-core`.

pub mod address;
pub mod allocator;
pub mod capacity;
pub mod netlink;
pub mod proc;
pub mod reactor;

/// Where the kernel says whether AppArmor is enabled (`Y`).
const APPARMOR_ENABLED: &str = "/sys/module/apparmor/parameters/enabled";

/// Whether the host's kernel has AppArmor enabled, as runc and kubelet check it.
pub fn apparmor_enabled() -> bool {
    apparmor_enabled_in(std::path::Path::new(APPARMOR_ENABLED))
}

fn apparmor_enabled_in(parameter: &std::path::Path) -> bool {
    std::fs::read_to_string(parameter).is_ok_and(|value| value.trim_start().starts_with('Y'))
}

/// The executable `name` on `PATH`, as a shell would find it.
pub fn on_path(name: &str) -> Option<std::path::PathBuf> {
    in_search_path(name, &std::env::var_os("PATH")?)
}

/// The first executable file `name` in the directories of `path` (a `PATH` value, such as
/// another process's), as a shell would find it.
pub fn in_search_path(name: &str, path: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path).map(|dir| dir.join(name)).find(|candidate| {
        std::fs::metadata(candidate)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_first_executable_of_its_name_in_a_search_path_is_found() {
        use std::os::unix::fs::PermissionsExt;
        let name = "containerd-shim-runc-v2";
        let dirs = tempfile::tempdir().unwrap();
        let (first, second) = (dirs.path().join("a"), dirs.path().join("b"));
        for dir in [&first, &second] {
            std::fs::create_dir(dir).unwrap();
        }
        // Not executable: skipped, as a shell's lookup would.
        std::fs::write(first.join(name), "").unwrap();
        std::fs::write(second.join(name), "").unwrap();
        std::fs::set_permissions(second.join(name), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let path = std::env::join_paths([&first, &second]).unwrap();
        assert_eq!(super::in_search_path(name, &path), Some(second.join(name)));
    }

    #[test]
    fn apparmor_enabled_reads_the_kernel_parameter() {
        let dir = tempfile::tempdir().unwrap();
        let parameter = dir.path().join("enabled");
        assert!(!super::apparmor_enabled_in(&parameter), "absent: not enabled");
        std::fs::write(&parameter, "Y\n").unwrap();
        assert!(super::apparmor_enabled_in(&parameter));
        std::fs::write(&parameter, "N\n").unwrap();
        assert!(!super::apparmor_enabled_in(&parameter));
    }
}
