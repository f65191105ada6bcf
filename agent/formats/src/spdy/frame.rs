//! SPDY/3.1's frames (draft 3.1, section 2.2 and 2.6): a control frame is
//! `1 | version (15 bits) | type (16) | flags (8) | length (24) | payload`, a data frame
//! `0 | stream ID (31) | flags (8) | length (24) | data`. Header blocks stay compressed
//! here ([`Frame::header_block`]); [`super::headers`] inflates and deflates them, since
//! their zlib state runs across the frames of a connection.
//!
//! [`Decoder`] takes bytes as they arrive and yields whole frames, refusing a frame longer
//! than its limit before buffering it. Unknown control frame types (and the removed
//! NOOP and CREDENTIAL) come out as [`Frame::Unknown`]: the draft says to ignore them.

/// The protocol version in every control frame.
pub const VERSION: u16 = 3;
/// A frame's fixed header: 8 bytes.
pub const HEADER_LEN: usize = 8;
/// The longest payload a frame's 24-bit length can say.
pub const MAX_LENGTH: usize = (1 << 24) - 1;
/// Stream IDs and window deltas are 31 bits.
pub const MAX_STREAM_ID: u32 = 0x7fff_ffff;

/// Control frame types.
pub mod kind {
    pub const SYN_STREAM: u16 = 1;
    pub const SYN_REPLY: u16 = 2;
    pub const RST_STREAM: u16 = 3;
    pub const SETTINGS: u16 = 4;
    pub const PING: u16 = 6;
    pub const GOAWAY: u16 = 7;
    pub const HEADERS: u16 = 8;
    pub const WINDOW_UPDATE: u16 = 9;
}

/// `FLAG_FIN` on DATA, SYN_STREAM, SYN_REPLY and HEADERS: the sender's last frame on
/// the stream.
pub const FLAG_FIN: u8 = 0x01;
/// `FLAG_UNIDIRECTIONAL` on SYN_STREAM: the receiver sends nothing on the stream.
pub const FLAG_UNIDIRECTIONAL: u8 = 0x02;
/// `FLAG_SETTINGS_CLEAR_SETTINGS` on SETTINGS.
pub const FLAG_CLEAR_SETTINGS: u8 = 0x01;

/// RST_STREAM's status codes.
pub mod rst {
    pub const PROTOCOL_ERROR: u32 = 1;
    pub const INVALID_STREAM: u32 = 2;
    pub const REFUSED_STREAM: u32 = 3;
    pub const UNSUPPORTED_VERSION: u32 = 4;
    pub const CANCEL: u32 = 5;
    pub const INTERNAL_ERROR: u32 = 6;
    pub const FLOW_CONTROL_ERROR: u32 = 7;
    pub const STREAM_IN_USE: u32 = 8;
    pub const STREAM_ALREADY_CLOSED: u32 = 9;
    pub const FRAME_TOO_LARGE: u32 = 11;
}

/// GOAWAY's status codes.
pub mod goaway {
    pub const OK: u32 = 0;
    pub const PROTOCOL_ERROR: u32 = 1;
    pub const INTERNAL_ERROR: u32 = 2;
}

/// SETTINGS' IDs (the one SPDY/3.1 peers act on is `INITIAL_WINDOW_SIZE`).
pub mod settings {
    pub const MAX_CONCURRENT_STREAMS: u32 = 4;
    pub const INITIAL_WINDOW_SIZE: u32 = 7;
}

/// One SETTINGS entry: `flags (8) | ID (24) | value (32)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    pub flags: u8,
    /// 24 bits.
    pub id: u32,
    pub value: u32,
}

/// A SPDY/3.1 frame. Stream IDs and window deltas are 31-bit; header blocks compressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Data {
        stream_id: u32,
        fin: bool,
        data: Vec<u8>,
    },
    SynStream {
        stream_id: u32,
        associated_to: u32,
        /// 3 bits, 0 the highest.
        priority: u8,
        slot: u8,
        fin: bool,
        unidirectional: bool,
        header_block: Vec<u8>,
    },
    SynReply {
        stream_id: u32,
        fin: bool,
        header_block: Vec<u8>,
    },
    RstStream {
        stream_id: u32,
        status: u32,
    },
    Settings {
        clear: bool,
        entries: Vec<Setting>,
    },
    Ping {
        id: u32,
    },
    GoAway {
        last_good_stream_id: u32,
        status: u32,
    },
    Headers {
        stream_id: u32,
        fin: bool,
        header_block: Vec<u8>,
    },
    /// `stream_id` 0 is the connection's window (SPDY/3.1).
    WindowUpdate {
        stream_id: u32,
        delta: u32,
    },
    /// A control frame of a type SPDY/3.1 does not define, to be ignored.
    Unknown {
        kind: u16,
        flags: u8,
        payload: Vec<u8>,
    },
}

/// A frame that breaks the framing. The connection answers it with GOAWAY (or, for
/// one stream's frame, RST_STREAM) and the description.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("a SPDY control frame of version {0}: this peer speaks version 3 (SPDY/3.1)")]
    Version(u16),
    #[error("a SPDY frame of {length} bytes, past this connection's limit of {limit}")]
    TooLarge { length: usize, limit: usize },
    #[error("a SPDY {frame} frame of {length} bytes: it must be {expected}")]
    Length { frame: &'static str, length: usize, expected: &'static str },
    #[error("a SPDY {frame} frame on stream 0: it names a stream")]
    StreamZero { frame: &'static str },
    #[error("a SPDY SETTINGS frame says {count} entries but holds {length} bytes")]
    SettingsCount { count: u32, length: usize },
    #[error("a SPDY WINDOW_UPDATE frame with a delta of {0}: it must be 1 to 2^31-1")]
    Delta(u32),
}

impl Frame {
    /// A SYN_STREAM as Kubernetes' clients open a stream: priority 0, no associated
    /// stream, neither finished nor unidirectional.
    pub fn syn_stream(stream_id: u32, header_block: Vec<u8>) -> Frame {
        Frame::SynStream {
            stream_id,
            associated_to: 0,
            priority: 0,
            slot: 0,
            fin: false,
            unidirectional: false,
            header_block,
        }
    }

    /// The frame's name, as the draft spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Frame::Data { .. } => "DATA",
            Frame::SynStream { .. } => "SYN_STREAM",
            Frame::SynReply { .. } => "SYN_REPLY",
            Frame::RstStream { .. } => "RST_STREAM",
            Frame::Settings { .. } => "SETTINGS",
            Frame::Ping { .. } => "PING",
            Frame::GoAway { .. } => "GOAWAY",
            Frame::Headers { .. } => "HEADERS",
            Frame::WindowUpdate { .. } => "WINDOW_UPDATE",
            Frame::Unknown { .. } => "unknown",
        }
    }

    /// The compressed header block of a SYN_STREAM, SYN_REPLY or HEADERS frame.
    pub fn header_block(&self) -> Option<&[u8]> {
        match self {
            Frame::SynStream { header_block, .. }
            | Frame::SynReply { header_block, .. }
            | Frame::Headers { header_block, .. } => Some(header_block),
            _ => None,
        }
    }

    /// The frame's bytes. Fields wider than their bits (a stream ID past 2^31-1, a
    /// priority past 7, a setting ID past 2^24-1) are cut to them; a payload past
    /// [`MAX_LENGTH`] is the caller's mistake (the connection splits data before).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        let flags = match self {
            Frame::Data { stream_id, fin, data } => {
                out.extend_from_slice(&(stream_id & MAX_STREAM_ID).to_be_bytes());
                out.extend_from_slice(&[u8::from(*fin) * FLAG_FIN, 0, 0, 0]);
                out.extend_from_slice(data);
                set_length(out, start);
                return;
            }
            Frame::SynStream {
                stream_id,
                associated_to,
                priority,
                slot,
                fin,
                unidirectional,
                header_block,
            } => {
                let mut payload = id(*stream_id).to_vec();
                payload.extend_from_slice(&id(*associated_to));
                payload.extend_from_slice(&[(priority & 0x07) << 5, *slot]);
                payload.extend_from_slice(header_block);
                let flags =
                    (u8::from(*fin) * FLAG_FIN) | (u8::from(*unidirectional) * FLAG_UNIDIRECTIONAL);
                {
                    control(out, kind::SYN_STREAM, &payload);
                    flags
                }
            }
            Frame::SynReply { stream_id, fin, header_block } => {
                let mut payload = id(*stream_id).to_vec();
                payload.extend_from_slice(header_block);
                {
                    control(out, kind::SYN_REPLY, &payload);
                    u8::from(*fin) * FLAG_FIN
                }
            }
            Frame::RstStream { stream_id, status } => {
                let mut payload = id(*stream_id).to_vec();
                payload.extend_from_slice(&status.to_be_bytes());
                {
                    control(out, kind::RST_STREAM, &payload);
                    0
                }
            }
            Frame::Settings { clear, entries } => {
                let mut payload = (entries.len() as u32).to_be_bytes().to_vec();
                for entry in entries {
                    let word = (u32::from(entry.flags) << 24) | (entry.id & 0x00ff_ffff);
                    payload.extend_from_slice(&word.to_be_bytes());
                    payload.extend_from_slice(&entry.value.to_be_bytes());
                }
                {
                    control(out, kind::SETTINGS, &payload);
                    u8::from(*clear) * FLAG_CLEAR_SETTINGS
                }
            }
            Frame::Ping { id } => {
                control(out, kind::PING, &id.to_be_bytes());
                0
            }
            Frame::GoAway { last_good_stream_id, status } => {
                let mut payload = id(*last_good_stream_id).to_vec();
                payload.extend_from_slice(&status.to_be_bytes());
                {
                    control(out, kind::GOAWAY, &payload);
                    0
                }
            }
            Frame::Headers { stream_id, fin, header_block } => {
                let mut payload = id(*stream_id).to_vec();
                payload.extend_from_slice(header_block);
                {
                    control(out, kind::HEADERS, &payload);
                    u8::from(*fin) * FLAG_FIN
                }
            }
            Frame::WindowUpdate { stream_id, delta } => {
                let mut payload = id(*stream_id).to_vec();
                payload.extend_from_slice(&id(*delta));
                {
                    control(out, kind::WINDOW_UPDATE, &payload);
                    0
                }
            }
            Frame::Unknown { kind, flags, payload } => {
                control(out, *kind, payload);
                *flags
            }
        };
        out[start + 4] = flags;
    }

    /// The frame's bytes, in a new buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }
}

/// The 8-byte header of a DATA frame carrying `length` bytes: what [`Frame::encode`]
/// writes before them, for a writer that keeps the payload in its own buffer.
pub fn data_header(stream_id: u32, fin: bool, length: usize) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[..4].copy_from_slice(&(stream_id & MAX_STREAM_ID).to_be_bytes());
    header[4] = u8::from(fin) * FLAG_FIN;
    header[5..].copy_from_slice(&(length.min(MAX_LENGTH) as u32).to_be_bytes()[1..]);
    header
}

/// A 31-bit field, its reserved bit clear.
fn id(value: u32) -> [u8; 4] {
    (value & MAX_STREAM_ID).to_be_bytes()
}

/// Writes a control frame's header and payload (flags 0, set by the caller).
fn control(out: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&(0x8000 | VERSION).to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(payload);
    set_length(out, start);
}

/// Writes the 24-bit length of the frame that starts at `start`.
fn set_length(out: &mut [u8], start: usize) {
    let length = (out.len() - start - HEADER_LEN).min(MAX_LENGTH) as u32;
    out[start + 5..start + 8].copy_from_slice(&length.to_be_bytes()[1..]);
}

/// The length of the frame at the start of `bytes` (header included), once its header
/// is there.
pub fn frame_len(bytes: &[u8]) -> Option<usize> {
    let header = bytes.first_chunk::<HEADER_LEN>()?;
    Some(HEADER_LEN + payload_len(header))
}

fn payload_len(header: &[u8; HEADER_LEN]) -> usize {
    (usize::from(header[5]) << 16) | (usize::from(header[6]) << 8) | usize::from(header[7])
}

fn word(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_be_bytes(word)
}

/// Parses one whole frame (`bytes` holds exactly it: its header and payload).
pub fn parse(bytes: &[u8]) -> Result<Frame, Error> {
    let Some((header, payload)) = bytes.split_first_chunk::<HEADER_LEN>() else {
        return Err(Error::Length {
            frame: "any",
            length: bytes.len(),
            expected: "8 bytes or more",
        });
    };
    let flags = header[4];
    let first = word(header, 0);
    if first & 0x8000_0000 == 0 {
        return Ok(Frame::Data {
            stream_id: first & MAX_STREAM_ID,
            fin: flags & FLAG_FIN != 0,
            data: payload.to_vec(),
        });
    }
    let version = ((first >> 16) & 0x7fff) as u16;
    if version != VERSION {
        return Err(Error::Version(version));
    }
    let kind = (first & 0xffff) as u16;
    let fin = flags & FLAG_FIN != 0;
    let at_least = |frame: &'static str, min: usize, expected: &'static str| {
        if payload.len() < min {
            Err(Error::Length { frame, length: payload.len(), expected })
        } else {
            Ok(())
        }
    };
    let exactly = |frame: &'static str, len: usize, expected: &'static str| {
        if payload.len() != len {
            Err(Error::Length { frame, length: payload.len(), expected })
        } else {
            Ok(())
        }
    };
    let stream = |frame: &'static str| {
        let stream_id = word(payload, 0) & MAX_STREAM_ID;
        if stream_id == 0 { Err(Error::StreamZero { frame }) } else { Ok(stream_id) }
    };
    match kind {
        kind::SYN_STREAM => {
            at_least("SYN_STREAM", 10, "10 bytes or more")?;
            Ok(Frame::SynStream {
                stream_id: stream("SYN_STREAM")?,
                associated_to: word(payload, 4) & MAX_STREAM_ID,
                priority: payload[8] >> 5,
                slot: payload[9],
                fin,
                unidirectional: flags & FLAG_UNIDIRECTIONAL != 0,
                header_block: payload[10..].to_vec(),
            })
        }
        kind::SYN_REPLY => {
            at_least("SYN_REPLY", 4, "4 bytes or more")?;
            Ok(Frame::SynReply {
                stream_id: stream("SYN_REPLY")?,
                fin,
                header_block: payload[4..].to_vec(),
            })
        }
        kind::HEADERS => {
            at_least("HEADERS", 4, "4 bytes or more")?;
            Ok(Frame::Headers {
                stream_id: stream("HEADERS")?,
                fin,
                header_block: payload[4..].to_vec(),
            })
        }
        kind::RST_STREAM => {
            exactly("RST_STREAM", 8, "8 bytes")?;
            Ok(Frame::RstStream { stream_id: stream("RST_STREAM")?, status: word(payload, 4) })
        }
        kind::SETTINGS => {
            at_least("SETTINGS", 4, "4 bytes or more")?;
            let count = word(payload, 0);
            let entries = &payload[4..];
            if entries.len() as u64 != u64::from(count) * 8 {
                return Err(Error::SettingsCount { count, length: payload.len() });
            }
            let entries = entries
                .chunks_exact(8)
                .map(|entry| {
                    let head = word(entry, 0);
                    Setting {
                        flags: (head >> 24) as u8,
                        id: head & 0x00ff_ffff,
                        value: word(entry, 4),
                    }
                })
                .collect();
            Ok(Frame::Settings { clear: flags & FLAG_CLEAR_SETTINGS != 0, entries })
        }
        kind::PING => {
            exactly("PING", 4, "4 bytes")?;
            Ok(Frame::Ping { id: word(payload, 0) })
        }
        kind::GOAWAY => {
            exactly("GOAWAY", 8, "8 bytes")?;
            Ok(Frame::GoAway {
                last_good_stream_id: word(payload, 0) & MAX_STREAM_ID,
                status: word(payload, 4),
            })
        }
        kind::WINDOW_UPDATE => {
            exactly("WINDOW_UPDATE", 8, "8 bytes")?;
            let delta = word(payload, 4) & MAX_STREAM_ID;
            if delta == 0 {
                return Err(Error::Delta(delta));
            }
            Ok(Frame::WindowUpdate { stream_id: word(payload, 0) & MAX_STREAM_ID, delta })
        }
        other => Ok(Frame::Unknown { kind: other, flags, payload: payload.to_vec() }),
    }
}

/// The frames in a byte stream that arrives in pieces.
#[derive(Debug)]
pub struct Decoder {
    buffer: Vec<u8>,
    max_frame: usize,
}

/// The longest frame payload [`Decoder::default`] takes: 1 MiB, well above what
/// Kubernetes' clients write in one frame (32 KiB of a copy, a few hundred bytes of
/// headers) and far below the 16 MiB the length field can say.
pub const DEFAULT_MAX_FRAME: usize = 1 << 20;

impl Default for Decoder {
    fn default() -> Decoder {
        Decoder::new(DEFAULT_MAX_FRAME)
    }
}

impl Decoder {
    /// A decoder that refuses frames whose payload is longer than `max_frame` bytes.
    pub fn new(max_frame: usize) -> Decoder {
        Decoder { buffer: Vec::new(), max_frame: max_frame.min(MAX_LENGTH) }
    }

    /// Adds bytes as they arrived.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// Bytes held that are not a whole frame yet.
    pub fn buffered(&self) -> usize {
        self.buffer.len()
    }

    /// The next whole frame, `Ok(None)` until its bytes have all arrived. After an error
    /// the stream cannot be framed any further: the connection ends.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, Error> {
        let Some(header) = self.buffer.first_chunk::<HEADER_LEN>() else { return Ok(None) };
        let length = payload_len(header);
        if length > self.max_frame {
            return Err(Error::TooLarge { length, limit: self.max_frame });
        }
        if self.buffer.len() < HEADER_LEN + length {
            return Ok(None);
        }
        let frame = parse(&self.buffer[..HEADER_LEN + length]);
        self.buffer.drain(..HEADER_LEN + length);
        frame.map(Some)
    }
}

#[cfg(test)]
pub(super) mod tests;
