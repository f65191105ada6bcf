//! Where a process's resident memory is (B5 reads the agent's): `/proc/<pid>/smaps`
//! summed by what each mapping holds. The RSS alone does not say which lever would help
//! (smaller code, fewer malloc arenas, a lower peak that the heap keeps).
//!
//! glibc does not name its mappings (2.36 here), so arenas and thread stacks are told apart
//! by their shape: a secondary arena is reserved as 64 MiB (`HEAP_MAX_SIZE` on 64-bit)
//! aligned to its size and made readable from its start, the rest staying `---p`; a
//! thread stack has its `---p` guard page just below it.

use std::collections::BTreeMap;
use std::path::Path;

use outpost::host::proc::smaps::{Mapping, parse};

/// glibc's `HEAP_MAX_SIZE` on 64-bit: what each secondary arena reserves, aligned to it.
const ARENA_RESERVE: u64 = 64 << 20;

/// What a mapping holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// The executable's own code (`r-xp` of the binary).
    Text,
    /// The rest of the binary: read-only data, relocations, initialized data.
    BinaryData,
    /// Shared libraries and other files mapped.
    Libraries,
    /// The main arena (`[heap]`: brk).
    Heap,
    /// Secondary malloc arenas (threads' allocations).
    Arenas,
    /// The main thread's and the other threads' stacks.
    Stacks,
    /// Other anonymous memory: large allocations malloc maps on their own, `.bss`.
    OtherAnon,
}

impl Kind {
    /// The key in the report's details.
    pub fn key(self) -> &'static str {
        match self {
            Kind::Text => "text_mib",
            Kind::BinaryData => "binary_data_mib",
            Kind::Libraries => "libraries_mib",
            Kind::Heap => "heap_mib",
            Kind::Arenas => "arenas_mib",
            Kind::Stacks => "stacks_mib",
            Kind::OtherAnon => "other_anon_mib",
        }
    }
}

/// The resident memory by kind, in MiB, and how many secondary arenas hold any.
#[derive(Debug, Clone, Default)]
pub struct Breakdown {
    pub rss_mib: BTreeMap<Kind, f64>,
    pub arenas: usize,
}

impl Breakdown {
    /// The breakdown of process `pid`'s memory (`/proc/<pid>/smaps` and its `exe`).
    pub fn of(pid: u32) -> std::io::Result<Breakdown> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps"))?;
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))?;
        Ok(Breakdown::from_smaps(&text, &exe))
    }

    fn from_smaps(text: &str, exe: &Path) -> Breakdown {
        let maps = parse(text);
        let exe = exe.to_string_lossy();
        let mut breakdown = Breakdown::default();
        for (i, map) in maps.iter().enumerate() {
            let below = i.checked_sub(1).and_then(|b| maps.get(b));
            let above = maps.get(i + 1);
            let kind = classify(map, below, above, &exe);
            if kind == Kind::Arenas && map.rss_kib > 0 {
                breakdown.arenas += 1;
            }
            *breakdown.rss_mib.entry(kind).or_default() += map.rss_kib as f64 / 1024.0;
        }
        breakdown
    }
}

fn classify(map: &Mapping, below: Option<&Mapping>, above: Option<&Mapping>, exe: &str) -> Kind {
    let guard = |m: Option<&Mapping>| m.is_some_and(|m| m.path.is_empty() && m.perms == "---p");
    match map.path.as_str() {
        "[heap]" => Kind::Heap,
        "[stack]" => Kind::Stacks,
        path if path == exe && map.perms.contains('x') => Kind::Text,
        path if path == exe => Kind::BinaryData,
        path if path.starts_with('/') => Kind::Libraries,
        "" if map.perms.starts_with("rw")
            && map.range.start.is_multiple_of(ARENA_RESERVE)
            && (map.range.end - map.range.start == ARENA_RESERVE
                || (guard(above) && above.is_some_and(|a| a.range.start == map.range.end))) =>
        {
            Kind::Arenas
        }
        "" if map.perms.starts_with("rw")
            && guard(below)
            && below.is_some_and(|b| b.range.end == map.range.start) =>
        {
            Kind::Stacks
        }
        // `[vdso]`, `[vvar]` and the like count with the other anonymous memory.
        _ => Kind::OtherAnon,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0c0000000-55d0c0100000 r--p 00000000 fe:01 42 /usr/bin/outpost
Rss:                1024 kB
55d0c0100000-55d0c0a00000 r-xp 00100000 fe:01 42 /usr/bin/outpost
Rss:                9216 kB
55d0c1000000-55d0c1200000 rw-p 00000000 00:00 0 [heap]
Rss:                2048 kB
7f0004000000-7f0004400000 rw-p 00000000 00:00 0 
Rss:                3072 kB
7f0004400000-7f0008000000 ---p 00000000 00:00 0 
Rss:                   0 kB
7f0010000000-7f0010001000 ---p 00000000 00:00 0 
Rss:                   0 kB
7f0010001000-7f0010201000 rw-p 00000000 00:00 0 
Rss:                  64 kB
7f0010300000-7f0010400000 rw-p 00000000 00:00 0 
Rss:                 512 kB
7f0020000000-7f0020100000 r-xp 00000000 fe:01 7 /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                 900 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
Rss:                  32 kB
VmFlags: rd wr mr mw me gd ac
";

    #[test]
    fn mappings_are_told_apart_by_shape() {
        let b = Breakdown::from_smaps(SMAPS, Path::new("/usr/bin/outpost"));
        let mib = |kind| b.rss_mib.get(&kind).copied().unwrap_or(0.0);
        assert_eq!(mib(Kind::Text), 9.0);
        assert_eq!(mib(Kind::BinaryData), 1.0);
        assert_eq!(mib(Kind::Heap), 2.0);
        assert_eq!(mib(Kind::Arenas), 3.0);
        assert_eq!(b.arenas, 1);
        assert_eq!(mib(Kind::Stacks), (64.0 + 32.0) / 1024.0);
        assert_eq!(mib(Kind::OtherAnon), 0.5);
        assert_eq!(mib(Kind::Libraries), 900.0 / 1024.0);
    }
}
