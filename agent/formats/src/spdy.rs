//! SPDY/3.1 (the Chromium project's draft 3.1), as Kubernetes' streaming endpoints speak
//! it: the framing ([`frame`]: every control frame and DATA, a streaming [`frame::Decoder`]
//! with size limits) and the name/value header blocks ([`headers`]), compressed with zlib
//! and the draft's fixed dictionary ([`dictionary`]), and the server side of a connection
//! as plain state ([`session`]: streams, flow control, PING, GOAWAY, the idle timeout and
//! the cap on streams, each input a method that returns what to do). No IO: the pump that
//! reads and writes the frames is the agent's (`agent/src/api/spdy/connection.rs`).
//!
//! Written here because no maintained Rust crate serves SPDY/3.1.

pub mod dictionary;
pub mod frame;
pub mod headers;
pub mod session;

pub use frame::{Decoder, Frame};
pub use headers::{Deflater, Headers, Inflater};
pub use session::{Action, Limits, Session};
