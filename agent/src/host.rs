//! What the agent reads about its host from the kernel, below every other module:
//! sources, the runtime, BPF, the audit and the metrics may all import it.

pub mod proc;

/// Where the kernel says whether AppArmor is enabled (`Y`).
const APPARMOR_ENABLED: &str = "/sys/module/apparmor/parameters/enabled";

/// Whether the host's kernel has AppArmor enabled, as kubelet checks it.
pub fn apparmor_enabled() -> bool {
    std::fs::read_to_string(APPARMOR_ENABLED).is_ok_and(|value| value.trim_start().starts_with('Y'))
}
