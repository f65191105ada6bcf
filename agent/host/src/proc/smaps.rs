//! `/proc/<pid>/smaps`: each mapping's header and the sizes the agent and its benchmarks
//! read of it (`Rss:`, `Anonymous:`).

use std::ops::Range;

/// One mapping of an `smaps` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub range: Range<u64>,
    /// `r-xp`, `rw-p`, ...
    pub perms: String,
    /// `major:minor` of the file's device (`00:00` for anonymous memory).
    pub device: String,
    /// The file's inode (0 for anonymous memory).
    pub inode: u64,
    /// The file's path, or `[heap]`, `[stack]`, ...; empty for anonymous memory.
    pub path: String,
    pub rss_kib: u64,
    /// `u64::MAX` when the file has no `Anonymous:` line for it: unknown, not none.
    pub anonymous_kib: u64,
}

/// The mappings of an `smaps` file, in its order.
pub fn parse(smaps: &str) -> Vec<Mapping> {
    let mut mappings: Vec<Mapping> = Vec::new();
    let kib = |value: &str| value.split_whitespace().next().and_then(|k| k.parse().ok());
    for line in smaps.lines() {
        if let Some(mapping) = header(line) {
            mappings.push(mapping);
        } else if let Some(mapping) = mappings.last_mut() {
            if let Some(rss) = line.strip_prefix("Rss:") {
                mapping.rss_kib = kib(rss).unwrap_or(0);
            } else if let Some(anonymous) = line.strip_prefix("Anonymous:") {
                mapping.anonymous_kib = kib(anonymous).unwrap_or(u64::MAX);
            }
        }
    }
    mappings
}

/// A mapping's header: `start-end perms offset device inode [path]`.
fn header(line: &str) -> Option<Mapping> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    let perms = fields.next()?;
    let _offset = fields.next()?;
    let device = fields.next()?;
    let inode = fields.next()?.parse().ok()?;
    let path = fields.collect::<Vec<_>>().join(" ");
    (perms.len() == 4).then(|| Mapping {
        range: start..end,
        perms: perms.to_owned(),
        device: device.to_owned(),
        inode,
        path,
        rss_kib: 0,
        anonymous_kib: u64::MAX,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn headers_and_sizes_are_read_and_other_lines_skipped() {
        let smaps = "\
55d0c0560000-55d0c1402000 r-xp 00560000 fe:00 5873695 /usr/bin/out post
Rss:               12308 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me sd
7f0004000000-7f0004400000 rw-p 00000000 00:00 0 
Rss:                3072 kB
";
        let mappings = super::parse(smaps);
        assert_eq!(mappings.len(), 2);
        let code = &mappings[0];
        assert_eq!(code.range, 0x55d0c0560000..0x55d0c1402000);
        assert_eq!(
            (code.perms.as_str(), code.device.as_str(), code.inode),
            ("r-xp", "fe:00", 5873695)
        );
        assert_eq!(code.path, "/usr/bin/out post");
        assert_eq!((code.rss_kib, code.anonymous_kib), (12308, 0));
        let anon = &mappings[1];
        assert_eq!((anon.path.as_str(), anon.inode, anon.rss_kib), ("", 0, 3072));
        assert_eq!(anon.anonymous_kib, u64::MAX, "no `Anonymous:` line: unknown");
    }
}
