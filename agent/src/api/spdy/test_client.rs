//! A SPDY/3.1 client side for the tests, written on the frame codec: it opens streams,
//! sends and finishes them, and reads the server's frames with their headers inflated.

use std::time::Duration;

use outpost_formats::spdy::frame::Frame;
use outpost_formats::spdy::{Decoder, Deflater, Headers, Inflater};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

/// How long a test waits for a frame before it fails: past the sessions' own 30-second
/// timeouts, which the paused-clock tests reach first.
const WAIT: Duration = Duration::from_secs(120);

/// The client's end of a connection.
pub struct Client {
    io: DuplexStream,
    decoder: Decoder,
    inflater: Inflater,
    deflater: Deflater,
    next_id: u32,
}

/// A frame from the server, its header block inflated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Frame(Frame),
    Reply { stream_id: u32, headers: Headers },
}

impl Client {
    /// A client and the server's end of its connection.
    pub fn pair() -> (Client, DuplexStream) {
        let (client, server) = tokio::io::duplex(1 << 20);
        let client = Client {
            io: client,
            decoder: Decoder::default(),
            inflater: Inflater::default(),
            deflater: Deflater::new(),
            next_id: 1,
        };
        (client, server)
    }

    pub fn io_mut(&mut self) -> &mut DuplexStream {
        &mut self.io
    }

    pub async fn write(&mut self, frame: Frame) {
        self.io.write_all(&frame.to_bytes()).await.expect("the server end is open");
    }

    /// Opens a stream with `headers`; its ID.
    pub async fn open(&mut self, headers: &[(&str, &str)]) -> u32 {
        let id = self.next_id;
        self.next_id += 2;
        self.open_as(id, headers).await;
        id
    }

    /// Opens stream `id` (any ID, for tests of wrong ones).
    pub async fn open_as(&mut self, id: u32, headers: &[(&str, &str)]) {
        let headers =
            Headers(headers.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect());
        let header_block = self.deflater.deflate(&headers);
        let frame = Frame::syn_stream(id, header_block);
        self.write(frame).await;
    }

    pub async fn send(&mut self, stream_id: u32, data: &[u8], fin: bool) {
        self.write(Frame::Data { stream_id, fin, data: data.to_vec() }).await;
    }

    /// The next frame from the server, `None` at the end of the connection.
    pub async fn next(&mut self) -> Option<Event> {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            if let Some(frame) = self.decoder.next_frame().expect("the server's frames are valid") {
                return Some(match frame {
                    Frame::SynReply { stream_id, header_block, .. } => Event::Reply {
                        stream_id,
                        headers: self.inflater.inflate(&header_block).expect("valid headers"),
                    },
                    other => Event::Frame(other),
                });
            }
            let n = tokio::time::timeout(WAIT, self.io.read(&mut buffer))
                .await
                .expect("the server answers in time")
                .expect("the pipe reads");
            if n == 0 {
                return None;
            }
            self.decoder.extend(&buffer[..n]);
        }
    }

    /// Reads until the end of the connection: each stream's data (until FIN), and the
    /// other frames in order.
    pub async fn read_to_end(&mut self) -> Transcript {
        let mut transcript = Transcript::default();
        while let Some(event) = self.next().await {
            match event {
                Event::Frame(Frame::Data { stream_id, fin, data }) => {
                    transcript.data.entry(stream_id).or_default().extend_from_slice(&data);
                    if fin {
                        transcript.finished.push(stream_id);
                    }
                }
                other => transcript.events.push(other),
            }
        }
        transcript
    }
}

/// What a client read.
#[derive(Debug, Default)]
pub struct Transcript {
    pub data: std::collections::BTreeMap<u32, Vec<u8>>,
    pub finished: Vec<u32>,
    pub events: Vec<Event>,
}

impl Transcript {
    pub fn text(&self, stream_id: u32) -> String {
        String::from_utf8_lossy(self.data.get(&stream_id).map_or(&[][..], |d| d)).into_owned()
    }
}
