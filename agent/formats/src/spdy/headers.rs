//! SPDY/3's name/value header blocks (draft 3.1, section 2.6.10): a 32-bit count of
//! pairs, then each name and value after its 32-bit length. Names are lowercase; a value
//! may hold several values separated by NUL bytes. On the wire the blocks of one
//! direction of a connection are one zlib stream, primed with the draft's dictionary
//! ([`super::dictionary`]) and flushed (`Z_SYNC_FLUSH`) after each block: [`Deflater`]
//! and [`Inflater`] keep that state, one of each per connection.

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::dictionary::DICTIONARY;

/// The longest header block [`Inflater::default`] inflates: 64 KiB, where Kubernetes'
/// streams carry a few short headers each.
pub const DEFAULT_MAX_BLOCK: usize = 64 * 1024;

/// A header block's pairs, in order. Names as sent (lowercase on the wire).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers(pub Vec<(String, String)>);

impl Headers {
    /// The first value of `name` (case-insensitive; a NUL-separated value's first part),
    /// as Go's `http.Header.Get` reads a SPDY header.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.split('\0').next().unwrap_or_default())
    }

    /// The uncompressed block. Names are written lowercase, as the draft requires.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = (self.0.len() as u32).to_be_bytes().to_vec();
        for (name, value) in &self.0 {
            out.extend_from_slice(&(name.len() as u32).to_be_bytes());
            out.extend(name.bytes().map(|b| b.to_ascii_lowercase()));
            out.extend_from_slice(&(value.len() as u32).to_be_bytes());
            out.extend_from_slice(value.as_bytes());
        }
        out
    }

    /// Reads an uncompressed block.
    pub fn decode(block: &[u8]) -> Result<Headers, Error> {
        let mut rest = block;
        let count = take_u32(&mut rest)?;
        // Each pair takes 8 bytes at least: a count past that is a lie, not an allocation.
        if u64::from(count) * 8 > rest.len() as u64 {
            return Err(Error::Truncated);
        }
        let mut pairs: Vec<(String, String)> = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let name = take_string(&mut rest)?;
            if name.is_empty() {
                return Err(Error::EmptyName);
            }
            if name.bytes().any(|b| b.is_ascii_uppercase()) {
                return Err(Error::Uppercase(name));
            }
            if pairs.iter().any(|(n, _)| *n == name) {
                return Err(Error::Duplicate(name));
            }
            let value = take_string(&mut rest)?;
            pairs.push((name, value));
        }
        if !rest.is_empty() {
            return Err(Error::Trailing(rest.len()));
        }
        Ok(Headers(pairs))
    }
}

impl<const N: usize> From<[(&str, &str); N]> for Headers {
    fn from(pairs: [(&str, &str); N]) -> Headers {
        Headers(pairs.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect())
    }
}

fn take_u32(rest: &mut &[u8]) -> Result<u32, Error> {
    let (word, tail) = rest.split_first_chunk::<4>().ok_or(Error::Truncated)?;
    *rest = tail;
    Ok(u32::from_be_bytes(*word))
}

fn take_string(rest: &mut &[u8]) -> Result<String, Error> {
    let len = take_u32(rest)? as usize;
    if len > rest.len() {
        return Err(Error::Truncated);
    }
    let (bytes, tail) = rest.split_at(len);
    *rest = tail;
    String::from_utf8(bytes.to_vec()).map_err(|_| Error::NotUtf8)
}

/// A header block that cannot be read. Each breaks the connection's compression
/// state or framing: the connection ends with GOAWAY.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("a SPDY header block ends inside a pair")]
    Truncated,
    #[error("a SPDY header block has {0} bytes after its last pair")]
    Trailing(usize),
    #[error("a SPDY header block has an empty header name")]
    EmptyName,
    #[error("a SPDY header block names {0:?} in uppercase: SPDY header names are lowercase")]
    Uppercase(String),
    #[error("a SPDY header block names {0:?} twice: several values go in one, NUL-separated")]
    Duplicate(String),
    #[error("a SPDY header name or value is not UTF-8")]
    NotUtf8,
    #[error("a SPDY header block inflates past {limit} bytes, this connection's limit")]
    TooLarge { limit: usize },
    #[error("a SPDY header block is not zlib data with the SPDY/3 dictionary: {0}")]
    Zlib(String),
}

/// Inflates one direction's header blocks.
pub struct Inflater {
    zlib: Decompress,
    max_block: usize,
}

impl std::fmt::Debug for Inflater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inflater").field("max_block", &self.max_block).finish_non_exhaustive()
    }
}

impl Default for Inflater {
    fn default() -> Inflater {
        Inflater::new(DEFAULT_MAX_BLOCK)
    }
}

impl Inflater {
    /// An inflater that refuses blocks longer than `max_block` bytes once inflated.
    pub fn new(max_block: usize) -> Inflater {
        Inflater { zlib: Decompress::new(true), max_block }
    }

    /// Inflates the next compressed block and reads its pairs. After an error the
    /// stream's state is lost: the connection cannot read another block.
    pub fn inflate(&mut self, compressed: &[u8]) -> Result<Headers, Error> {
        Headers::decode(&self.inflate_raw(compressed)?)
    }

    /// Inflates the next compressed block.
    pub fn inflate_raw(&mut self, compressed: &[u8]) -> Result<Vec<u8>, Error> {
        let mut out = Vec::with_capacity(256);
        let mut input = compressed;
        loop {
            if out.len() == out.capacity() {
                if out.len() >= self.max_block {
                    return Err(Error::TooLarge { limit: self.max_block });
                }
                out.reserve_exact(out.capacity().max(256).min(self.max_block - out.len()));
            }
            let before = self.zlib.total_in();
            let result = self.zlib.decompress_vec(input, &mut out, FlushDecompress::Sync);
            let used = (self.zlib.total_in() - before) as usize;
            input = &input[used.min(input.len())..];
            match result {
                Ok(Status::StreamEnd) => {
                    return Err(Error::Zlib("the zlib stream ended; SPDY's never does".into()));
                }
                Ok(_) => {
                    if input.is_empty() && out.len() < out.capacity() {
                        return Ok(out);
                    }
                    if used == 0 && out.len() < out.capacity() {
                        return Err(Error::Zlib("the block ends inside compressed data".into()));
                    }
                }
                Err(e) => match e.needs_dictionary() {
                    Some(_) => {
                        self.zlib
                            .set_dictionary(&DICTIONARY)
                            .map_err(|e| Error::Zlib(e.to_string()))?;
                    }
                    None => return Err(Error::Zlib(e.to_string())),
                },
            }
        }
    }
}

/// Deflates one direction's header blocks.
pub struct Deflater {
    zlib: Compress,
}

impl std::fmt::Debug for Deflater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deflater").finish_non_exhaustive()
    }
}

impl Default for Deflater {
    fn default() -> Deflater {
        Deflater::new()
    }
}

impl Deflater {
    pub fn new() -> Deflater {
        let mut zlib = Compress::new(Compression::default(), true);
        // A fresh stream takes a dictionary: this cannot fail.
        let _ = zlib.set_dictionary(&DICTIONARY);
        Deflater { zlib }
    }

    /// The compressed block of `headers`.
    pub fn deflate(&mut self, headers: &Headers) -> Vec<u8> {
        self.deflate_raw(&headers.encode())
    }

    /// Compresses `block` and flushes it, so that the peer can inflate it whole.
    pub fn deflate_raw(&mut self, block: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(block.len() / 2 + 64);
        let mut input = block;
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(out.capacity().max(256));
            }
            let before = self.zlib.total_in();
            // The stream is never finished, and memory is reserved: compressing cannot fail.
            let _ = self.zlib.compress_vec(input, &mut out, FlushCompress::Sync);
            let used = (self.zlib.total_in() - before) as usize;
            input = &input[used.min(input.len())..];
            // Done once the input is in and the flush did not fill the buffer.
            if input.is_empty() && out.len() < out.capacity() {
                return out;
            }
        }
    }
}

#[cfg(test)]
mod tests;
