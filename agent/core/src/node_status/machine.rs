//! Parsers for what the machine says about itself in `/proc`, `/sys` and `/etc`: the
//! agent reads the files, these turn their text into numbers and names.

/// `/proc/meminfo`'s totals, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemInfo {
    /// `MemTotal`.
    pub total: u64,
    /// `MemAvailable`: what can be allocated without swapping (the kernel's estimate).
    pub available: u64,
}

/// `MemTotal` and `MemAvailable` of `/proc/meminfo` (`None` if either is missing).
pub fn meminfo(text: &str) -> Option<MemInfo> {
    Some(MemInfo {
        total: meminfo_field(text, "MemTotal")?,
        available: meminfo_field(text, "MemAvailable")?,
    })
}

/// One `/proc/meminfo` field in bytes (`kB` values scaled; a count has no unit).
pub fn meminfo_field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix(':')?;
        let mut words = rest.split_whitespace();
        let value: u64 = words.next()?.parse().ok()?;
        match words.next() {
            Some("kB") => value.checked_mul(1024),
            None => Some(value),
            Some(_) => None,
        }
    })
}

/// `PRETTY_NAME` of an os-release file (`osImage`), unquoted as a shell would
/// (os-release(5): double or single quotes, backslash escapes inside double quotes).
pub fn os_release_pretty_name(text: &str) -> Option<String> {
    let value = text.lines().find_map(|l| l.trim().strip_prefix("PRETTY_NAME="))?;
    let unquoted = if let Some(inner) = value.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => out.extend(chars.next()),
                c => out.push(c),
            }
        }
        out
    } else if let Some(inner) = value.strip_prefix('\'') {
        inner.split('\'').next().unwrap_or_default().to_owned()
    } else {
        value.trim().to_owned()
    };
    Some(unquoted).filter(|v| !v.is_empty())
}

/// The number of CPUs in a kernel CPU list (`/sys/devices/system/cpu/online`:
/// `0-3,6,8-9`); `None` if it does not parse.
pub fn cpu_list_count(text: &str) -> Option<u32> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    text.split(',').try_fold(0u32, |count, range| {
        let n = match range.split_once('-') {
            Some((first, last)) => {
                let (first, last): (u32, u32) = (first.parse().ok()?, last.parse().ok()?);
                last.checked_sub(first)?.checked_add(1)?
            }
            None => range.parse::<u32>().map(|_| 1).ok()?,
        };
        count.checked_add(n)
    })
}

/// The number of scheduling entities (threads) that exist, the 4th field of
/// `/proc/loadavg` (`0.85 0.79 1.24 2/111 16658` → 111), as kubelet counts PIDs in use.
pub fn loadavg_tasks(text: &str) -> Option<u64> {
    let field = text.split_whitespace().nth(3)?;
    field.split_once('/')?.1.parse().ok()
}

/// The first line of an identity file (`/etc/machine-id`, `boot_id`), trimmed.
pub fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().trim().to_owned()
}

/// Go's name of an architecture (`GOARCH`, what `kubernetes.io/arch` and
/// `nodeInfo.architecture` hold) for Rust's `std::env::consts::ARCH`.
pub fn go_arch(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "x86" => "386",
        "aarch64" => "arm64",
        "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
        "loongarch64" => "loong64",
        "mips64" if cfg!(target_endian = "little") => "mips64le",
        "mips" if cfg!(target_endian = "little") => "mipsle",
        // arm, riscv64, s390x, powerpc64 (big endian), mips64, mips: the same names.
        other => other,
    }
}
