//! The platforms `dist` builds for: a Rust target triple with its Debian architecture
//! name, ELF machine number, and (when it is not the host's) the Debian cross toolchain
//! and the qemu user-mode emulator that runs its binaries here.

use anyhow::bail;

/// What `dist` knows about one CPU architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Arch {
    /// The first component of a Rust target triple (`std::env::consts::ARCH`).
    rust: &'static str,
    /// Debian's (and Go's) name: `.deb` and tarball file names.
    debian: &'static str,
    /// The GNU triple: cross tools are `<gnu>-gcc`, the cross sysroot `/usr/<gnu>`.
    gnu: &'static str,
    /// `e_machine` in the ELF header (EM_X86_64, EM_AARCH64).
    elf_machine: u16,
    /// The qemu user-mode emulator's name (Debian `qemu-user-static`).
    qemu: &'static str,
}

const ARCHES: &[Arch] = &[
    Arch {
        rust: "x86_64",
        debian: "amd64",
        gnu: "x86_64-linux-gnu",
        elf_machine: 62,
        qemu: "qemu-x86_64-static",
    },
    Arch {
        rust: "aarch64",
        debian: "arm64",
        gnu: "aarch64-linux-gnu",
        elf_machine: 183,
        qemu: "qemu-aarch64-static",
    },
];

/// The glibc target triples `dist` builds: `<arch>-unknown-linux-gnu`.
const VENDOR_OS: &str = "-unknown-linux-gnu";

/// A target of `dist`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    /// The Rust target triple, e.g. `aarch64-unknown-linux-gnu`.
    pub triple: String,
    arch: Arch,
    /// Whether it is another architecture than the host's (cross-compiled, run in qemu).
    pub cross: bool,
}

impl Platform {
    /// The platform of `triple`, built on a host whose architecture is `host_arch`.
    pub fn new(triple: &str, host_arch: &str) -> anyhow::Result<Platform> {
        let known = || ARCHES.iter().map(|a| format!("{}{VENDOR_OS}", a.rust)).collect::<Vec<_>>();
        let Some(arch) =
            triple.strip_suffix(VENDOR_OS).and_then(|rust| ARCHES.iter().find(|a| a.rust == rust))
        else {
            bail!("`dist` cannot build for {triple:?}; known targets: {}", known().join(", "));
        };
        Ok(Platform { triple: triple.to_owned(), arch: *arch, cross: arch.rust != host_arch })
    }

    /// The host's own platform (this xtask's architecture).
    pub fn host() -> anyhow::Result<Platform> {
        let arch = std::env::consts::ARCH;
        Platform::new(&format!("{arch}{VENDOR_OS}"), arch)
    }

    /// Debian's name of the architecture (`amd64`, `arm64`).
    pub fn debian_arch(&self) -> &'static str {
        self.arch.debian
    }

    /// The ELF `e_machine` of this platform's binaries.
    pub fn elf_machine(&self) -> u16 {
        self.arch.elf_machine
    }

    /// The cross C compiler (also the linker), e.g. `aarch64-linux-gnu-gcc`.
    pub fn cross_gcc(&self) -> String {
        format!("{}-gcc", self.arch.gnu)
    }

    /// One of the cross binutils, e.g. `aarch64-linux-gnu-strip` for `strip`.
    pub fn cross_tool(&self, tool: &str) -> String {
        format!("{}-{tool}", self.arch.gnu)
    }

    /// The sysroot of Debian's cross libc (`libc6-<arch>-cross`), for qemu's `-L`.
    pub fn cross_sysroot(&self) -> String {
        format!("/usr/{}", self.arch.gnu)
    }

    /// The qemu user-mode emulator for this platform's binaries.
    pub fn qemu(&self) -> &'static str {
        self.arch.qemu
    }

    /// The Debian packages a cross build and its smoke test need.
    pub fn cross_packages(&self) -> [String; 3] {
        [
            format!("gcc-{}", self.arch.gnu.replace('_', "-")),
            format!("libc6-dev-{}-cross", self.arch.debian),
            "qemu-user-static".to_owned(),
        ]
    }

    /// The environment of the cargo call that cross-builds for this platform: the linker,
    /// and the C compiler and archiver for build scripts that compile C (`cc` crate).
    pub fn cross_env(&self) -> Vec<(String, String)> {
        let upper = self.triple.to_uppercase().replace('-', "_");
        let lower = self.triple.replace('-', "_");
        let gnu = self.arch.gnu;
        vec![
            (format!("CARGO_TARGET_{upper}_LINKER"), format!("{gnu}-gcc")),
            (format!("CC_{lower}"), format!("{gnu}-gcc")),
            (format!("AR_{lower}"), format!("{gnu}-ar")),
        ]
    }
}

/// The `e_machine` of a little-endian 64-bit ELF file's header.
pub fn elf_machine(header: &[u8]) -> anyhow::Result<u16> {
    let Some(head) = header.get(..20) else {
        bail!("too short for an ELF header ({} bytes)", header.len());
    };
    if head[..4] != *b"\x7fELF" {
        bail!("not an ELF file (magic {:02x?})", &head[..4]);
    }
    if head[4] != 2 || head[5] != 1 {
        bail!("not a little-endian 64-bit ELF file (class {}, data {})", head[4], head[5]);
    }
    Ok(u16::from_le_bytes([head[18], head[19]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debian_names_of_the_known_targets() {
        let arm = Platform::new("aarch64-unknown-linux-gnu", "x86_64").unwrap();
        assert_eq!(arm.debian_arch(), "arm64");
        assert_eq!(arm.elf_machine(), 183);
        assert!(arm.cross);
        assert_eq!(arm.cross_gcc(), "aarch64-linux-gnu-gcc");
        assert_eq!(arm.cross_sysroot(), "/usr/aarch64-linux-gnu");
        assert_eq!(arm.qemu(), "qemu-aarch64-static");
        assert_eq!(
            arm.cross_packages(),
            ["gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross", "qemu-user-static"]
        );
        let x86 = Platform::new("x86_64-unknown-linux-gnu", "x86_64").unwrap();
        assert_eq!(x86.debian_arch(), "amd64");
        assert_eq!(x86.elf_machine(), 62);
        assert!(!x86.cross);
        let x86_on_arm = Platform::new("x86_64-unknown-linux-gnu", "aarch64").unwrap();
        assert!(x86_on_arm.cross);
        assert_eq!(x86_on_arm.cross_packages()[0], "gcc-x86-64-linux-gnu");
    }

    #[test]
    fn unknown_targets_are_refused_with_the_known_ones() {
        for triple in ["aarch64-unknown-linux-musl", "riscv64gc-unknown-linux-gnu", "arm64", ""] {
            let error = Platform::new(triple, "x86_64").unwrap_err().to_string();
            assert!(error.contains("aarch64-unknown-linux-gnu"), "{error}");
        }
    }

    #[test]
    fn cross_env_names_the_target_in_cargo_and_cc_spelling() {
        let arm = Platform::new("aarch64-unknown-linux-gnu", "x86_64").unwrap();
        assert_eq!(
            arm.cross_env(),
            [
                ("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER", "aarch64-linux-gnu-gcc"),
                ("CC_aarch64_unknown_linux_gnu", "aarch64-linux-gnu-gcc"),
                ("AR_aarch64_unknown_linux_gnu", "aarch64-linux-gnu-ar"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
    }

    #[test]
    fn elf_machine_reads_the_header() {
        let mut header = b"\x7fELF\x02\x01\x01\x00".to_vec();
        header.resize(18, 0);
        header.extend_from_slice(&183u16.to_le_bytes());
        header.extend_from_slice(&[1, 0, 0, 0]);
        assert_eq!(elf_machine(&header).unwrap(), 183);
        assert!(elf_machine(&header[..19]).is_err());
        assert!(elf_machine(b"#!/bin/sh\necho not an elf file\n").is_err());
        let mut elf32 = header.clone();
        elf32[4] = 1;
        assert!(elf_machine(&elf32).unwrap_err().to_string().contains("64-bit"));
    }
}
