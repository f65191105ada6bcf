//! `spdy_frame`: bytes a SPDY/3.1 client sends, as the agent's connection reads them
//! ([`outpost_formats::spdy`]): cut into pieces where the first byte says, framed by the
//! [`Decoder`], each frame written back and read again, and every header block inflated
//! on one [`Inflater`] as the connection does (one zlib stream per direction).

use outpost_formats::spdy::frame::{self, Frame};
use outpost_formats::spdy::{Decoder, Deflater, Inflater};

/// The decoder's frame limit here: small, so that the limit is reached.
const MAX_FRAME: usize = 4096;
/// The inflater's limit.
const MAX_BLOCK: usize = 8192;

pub fn spdy_frame(data: &[u8]) {
    let Some((&step, stream)) = data.split_first() else { return };
    let step = usize::from(step).max(1);
    let mut decoder = Decoder::new(MAX_FRAME);
    let mut inflater = Inflater::new(MAX_BLOCK);
    let mut deflater = Deflater::new();
    let mut inflate_ok = true;
    'input: for chunk in stream.chunks(step) {
        decoder.extend(chunk);
        loop {
            let before = decoder.buffered();
            match decoder.next_frame() {
                Ok(Some(frame)) => {
                    let bytes = frame.to_bytes();
                    assert!(bytes.len() <= before, "a frame longer than the bytes it came from");
                    assert_eq!(frame::frame_len(&bytes), Some(bytes.len()));
                    assert_eq!(
                        frame::parse(&bytes).as_ref(),
                        Ok(&frame),
                        "{} does not read back",
                        frame.name()
                    );
                    if let Some(block) = frame.header_block()
                        && inflate_ok
                    {
                        match inflater.inflate(block) {
                            Ok(headers) => {
                                // What is read can be written and read again.
                                let again =
                                    Inflater::new(MAX_BLOCK * 4).inflate(&deflater_fresh(&headers));
                                assert_eq!(again.as_ref(), Ok(&headers));
                                let _ = deflater.deflate(&headers);
                            }
                            // The connection ends here: the zlib state is lost.
                            Err(_) => inflate_ok = false,
                        }
                    }
                    if let Frame::Data { data, .. } = &frame {
                        assert!(data.len() <= MAX_FRAME);
                    }
                }
                Ok(None) => break,
                Err(_) => break 'input,
            }
        }
    }
}

/// `headers` compressed on a fresh stream.
fn deflater_fresh(headers: &outpost_formats::spdy::Headers) -> Vec<u8> {
    Deflater::new().deflate(headers)
}
