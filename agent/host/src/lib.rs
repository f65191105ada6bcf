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
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|candidate| {
        std::fs::metadata(candidate)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

#[cfg(test)]
mod tests {
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
