//! The executable's pages that a burst of work mapped, handed back to the page cache.
//!
//! The kernel maps a file's pages into a process up to 64 KiB at a time around each fault
//! (`fault_around_bytes`), and code is laid out by crate, not by when it runs. The
//! agent's start (arguments, the BPF loader, each source's first sync) and a burst of pod
//! starts touch code in nearly every 64 KiB of the binary: 12.0 MiB of the x86_64
//! distribution binary's 15.0 MiB of code stayed mapped in an agent with no pod, which
//! then ran on 5.1 MiB of it (B5, measured with `/proc/<pid>/pagemap`).
//!
//! [`release`] unmaps, with `MADV_DONTNEED`, the executable's mappings that nobody wrote
//! to: its code, read-only data, relocations and unwind tables. Their pages stay in the
//! page cache; the next access maps one back with a minor fault, without reading the disk
//! (unless memory pressure dropped it in between, as it could have anyway).
//!
//! A mapping holding anonymous pages is left as it is: those are private copies that
//! somebody wrote (the RELRO data the loader relocated, a debugger's breakpoint, a
//! uprobe), and `MADV_DONTNEED` would throw the writes away.

use std::io;

use crate::proc::smaps::{Mapping, parse};

/// Unmaps the executable's unwritten mappings, as above; the bytes they had resident.
pub fn release() -> io::Result<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps")?;
    let own_code = release as *const () as u64;
    let mut released = 0;
    for mapping in releasable(&smaps, own_code) {
        #[allow(unsafe_code)]
        // SAFETY: the range is a whole private, read-only mapping of the executable with
        // no anonymous page: every page in it is the file's own content, which the next
        // access maps back unchanged, so no reference into it (code, `&'static` data)
        // sees a difference. Nothing is unmapped from the address space.
        let advised = unsafe {
            libc::madvise(
                mapping.range.start as *mut libc::c_void,
                (mapping.range.end - mapping.range.start) as usize,
                libc::MADV_DONTNEED,
            )
        };
        if advised != 0 {
            return Err(io::Error::last_os_error());
        }
        released += mapping.rss_kib * 1024;
    }
    Ok(released)
}

/// The mappings of the file mapped at `own_code` (the executable) that are private, not
/// writable, and hold no anonymous page. A mapping whose `Anonymous:` line is missing
/// counts as holding some: it is not released on a guess.
fn releasable(smaps: &str, own_code: u64) -> Vec<Mapping> {
    let mappings = parse(smaps);
    let Some(executable) = mappings.iter().find(|m| m.range.contains(&own_code) && m.inode != 0)
    else {
        return Vec::new();
    };
    let (device, inode) = (executable.device.clone(), executable.inode);
    mappings
        .into_iter()
        .filter(|m| {
            m.inode == inode
                && m.device == device
                && m.perms.ends_with('p')
                && !m.perms.contains('w')
                && m.anonymous_kib == 0
                && m.rss_kib > 0
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::ops::Range;

    use super::*;

    /// The agent's mappings as a PIE binary has them: read-only data, code, RELRO
    /// (relocated: anonymous), data; a library; the heap.
    const SMAPS: &str = "\
55d0c0000000-55d0c0560000 r--p 00000000 fe:00 5873695 /usr/bin/outpost
Rss:                1996 kB
Anonymous:             0 kB
55d0c0560000-55d0c1402000 r-xp 00560000 fe:00 5873695 /usr/bin/outpost
Rss:               12308 kB
Anonymous:             0 kB
55d0c1402000-55d0c149b000 r--p 01401000 fe:00 5873695 /usr/bin/outpost
Rss:                 612 kB
Anonymous:           612 kB
55d0c149b000-55d0c14a0000 rw-p 0149a000 fe:00 5873695 /usr/bin/outpost
Rss:                  20 kB
Anonymous:            20 kB
55d0c2000000-55d0c2250000 rw-p 00000000 00:00 0 [heap]
Rss:                 908 kB
Anonymous:           908 kB
7f29e3b17000-7f29e3c6d000 r-xp 00026000 fe:00 326279 /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                1124 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me sd
";

    const IN_CODE: u64 = 0x55d0c0600000;

    fn ranges(mappings: &[Mapping]) -> Vec<Range<u64>> {
        mappings.iter().map(|m| m.range.clone()).collect()
    }

    #[test]
    fn b5_the_executables_unwritten_mappings_are_released() {
        let released = releasable(SMAPS, IN_CODE);
        assert_eq!(
            ranges(&released),
            [0x55d0c0000000..0x55d0c0560000, 0x55d0c0560000..0x55d0c1402000],
            "read-only data and code; not RELRO, data, the heap or libc"
        );
        assert_eq!(released.iter().map(|m| m.rss_kib).sum::<u64>(), 1996 + 12308);
    }

    #[test]
    fn b5_code_a_debugger_wrote_to_is_kept() {
        let written = SMAPS.replacen(
            "Rss:               12308 kB\nAnonymous:             0 kB",
            "Rss:               12308 kB\nAnonymous:             4 kB",
            1,
        );
        assert_eq!(ranges(&releasable(&written, IN_CODE)), vec![(0x55d0c0000000..0x55d0c0560000)]);
    }

    #[test]
    fn b5_nothing_is_released_on_a_guess() {
        // No `Anonymous:` line (an older kernel's format): kept.
        let unknown: String = SMAPS
            .lines()
            .filter(|l| !l.starts_with("Anonymous:"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(releasable(&unknown, IN_CODE).is_empty());
        // An address in no file mapping (the heap), or in none at all.
        assert!(releasable(SMAPS, 0x55d0c2000100).is_empty());
        assert!(releasable(SMAPS, 0x1000).is_empty());
        assert!(releasable("", IN_CODE).is_empty());
    }

    /// A static the test reads back after its page was released.
    static TABLE: [u64; 4] = [2, 3, 5, 7];

    #[test]
    fn b5_this_process_releases_its_code_and_runs_on() {
        let rss = |smaps: &str, perms: &str| {
            releasable(smaps, release as *const () as u64)
                .into_iter()
                .filter(|m| m.perms == perms)
                .map(|m| m.rss_kib)
                .sum::<u64>()
        };
        let before = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let released = release().unwrap();
        let after = std::fs::read_to_string("/proc/self/smaps").unwrap();
        eprintln!(
            "code {} -> {} KiB, released {released} bytes",
            rss(&before, "r-xp"),
            rss(&after, "r-xp")
        );
        assert!(released >= rss(&before, "r-xp") * 1024, "the code was resident: {released}");
        assert!(rss(&after, "r-xp") < rss(&before, "r-xp"), "the code's pages left");
        // What was released maps back unchanged: code runs, data reads the same.
        let own = ranges(&releasable(&before, release as *const () as u64));
        let mapped = ranges(&parse(&after));
        assert!(own.iter().all(|r| mapped.contains(r)), "no mapping went away: {own:x?}");
        assert_eq!(std::hint::black_box(&TABLE).iter().product::<u64>(), 210);
    }
}
