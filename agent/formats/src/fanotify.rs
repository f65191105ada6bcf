//! The events a fanotify descriptor reads out, as the kernel writes them with
//! `FAN_REPORT_DFID_NAME`: `struct fanotify_event_metadata`, then info records, of which
//! the directory's (`DFID_NAME` or `DFID`: filesystem id, file handle, the entry's name)
//! is the one read. Every length comes from the kernel and is checked before use. No IO:
//! the file source's fanotify backend reads the descriptor.

/// `sizeof(struct fanotify_event_metadata)` (`FAN_EVENT_METADATA_LEN`).
const METADATA_LEN: usize = 24;

/// One event as the kernel wrote it.
#[derive(Debug, PartialEq, Eq)]
pub struct RawEvent<'a> {
    pub mask: u64,
    pub pid: i32,
    /// The `DFID_NAME` or `DFID` record: the directory, and the entry's name.
    pub dir: Option<Fid<'a>>,
}

#[derive(Debug, PartialEq, Eq)]
pub struct Fid<'a> {
    pub fsid: [u8; 8],
    pub handle_type: i32,
    pub handle: &'a [u8],
    /// For `DFID_NAME`: the name without its NUL terminator (`.` for the directory itself).
    pub name: Option<&'a [u8]>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Malformed {
    /// The metadata version is not the one this code reads.
    Version(u8),
    /// An event or record whose lengths do not add up.
    Record(&'static str),
}

/// Parses a buffer returned by `read(2)` on a fanotify descriptor. Every length comes
/// from the kernel and is checked before use; unknown record types are skipped. After
/// an event whose framing is broken, parsing stops (the rest cannot be found).
pub fn parse(buf: &[u8]) -> impl Iterator<Item = Result<RawEvent<'_>, Malformed>> {
    let mut rest = buf;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let event = next_event(rest);
        match event {
            Ok((raw, len)) => {
                rest = rest.get(len..).unwrap_or_default();
                Some(raw)
            }
            Err(malformed) => {
                rest = &[];
                Some(Err(malformed))
            }
        }
    })
}

/// One framed event: its contents (or what is wrong with its records), and its length.
type Framed<'a> = (Result<RawEvent<'a>, Malformed>, usize);

/// Frames the first event of `buf`; fails if the framing itself is broken.
fn next_event(buf: &[u8]) -> Result<Framed<'_>, Malformed> {
    let header = buf.get(..METADATA_LEN).ok_or(Malformed::Record("truncated event metadata"))?;
    let event_len =
        u32_at(header, 0).ok_or(Malformed::Record("truncated event metadata"))? as usize;
    let version = header.get(4).copied().unwrap_or_default();
    if version != libc::FANOTIFY_METADATA_VERSION {
        return Err(Malformed::Version(version));
    }
    let metadata_len =
        u16_at(header, 6).ok_or(Malformed::Record("truncated event metadata"))? as usize;
    let mask = u64_at(header, 8).ok_or(Malformed::Record("truncated event metadata"))?;
    let pid = i32_at(header, 20).ok_or(Malformed::Record("truncated event metadata"))?;
    if metadata_len < METADATA_LEN || event_len < metadata_len {
        return Err(Malformed::Record("event shorter than its metadata"));
    }
    let event = buf.get(..event_len).ok_or(Malformed::Record("event longer than the buffer"))?;
    // The descriptor field is FAN_NOFD in FID reporting mode: there is nothing to close.
    let records = event.get(metadata_len..).unwrap_or_default();
    Ok((parse_records(records, mask, pid), event_len))
}

fn parse_records(mut records: &[u8], mask: u64, pid: i32) -> Result<RawEvent<'_>, Malformed> {
    let mut dir = None;
    while !records.is_empty() {
        let info_type = *records.first().ok_or(Malformed::Record("truncated info record"))?;
        let len = u16_at(records, 2).ok_or(Malformed::Record("truncated info record"))? as usize;
        if len < 4 {
            return Err(Malformed::Record("info record shorter than its header"));
        }
        let record =
            records.get(..len).ok_or(Malformed::Record("info record longer than its event"))?;
        records = records.get(len..).unwrap_or_default();
        let named = match info_type {
            libc::FAN_EVENT_INFO_TYPE_DFID_NAME => true,
            libc::FAN_EVENT_INFO_TYPE_DFID => false,
            _ => continue,
        };
        if dir.is_none() {
            dir = Some(parse_fid(record, named)?);
        }
    }
    Ok(RawEvent { mask, pid, dir })
}

/// Parses `struct fanotify_event_info_fid` (header, fsid, `struct file_handle`), then
/// for `DFID_NAME` the NUL-terminated name.
fn parse_fid(record: &[u8], named: bool) -> Result<Fid<'_>, Malformed> {
    const TRUNCATED: Malformed = Malformed::Record("truncated fid record");
    let fsid: [u8; 8] =
        record.get(4..12).and_then(|bytes| bytes.try_into().ok()).ok_or(TRUNCATED)?;
    let handle_bytes = u32_at(record, 12).ok_or(TRUNCATED)? as usize;
    let handle_type = i32_at(record, 16).ok_or(TRUNCATED)?;
    let handle_end = 20usize.checked_add(handle_bytes).ok_or(TRUNCATED)?;
    let handle = record.get(20..handle_end).ok_or(TRUNCATED)?;
    let name = if named {
        let tail = record.get(handle_end..).unwrap_or_default();
        let end = tail
            .iter()
            .position(|&b| b == 0)
            .ok_or(Malformed::Record("name without NUL terminator"))?;
        let name = tail.get(..end).unwrap_or_default();
        if name.is_empty() {
            return Err(Malformed::Record("empty name"));
        }
        Some(name)
    } else {
        None
    };
    Ok(Fid { fsid, handle_type, handle, name })
}

fn u16_at(buf: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(buf.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(buf.get(at..at + 4)?.try_into().ok()?))
}

fn i32_at(buf: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_ne_bytes(buf.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(buf: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(buf.get(at..at + 8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests;
