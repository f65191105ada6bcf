//! L1's client side, on loopback only: an open-loop driver of plain HTTP/1.1 GETs over a
//! bounded pool of connections, and following log streams held until told to stop.
//!
//! Open loop: request `n` is due at `start + n / rate` and its latency counts from then,
//! so a request that waits for a free connection (because earlier ones have not
//! answered) shows that wait; nothing is skipped to let the agent catch up. Every loop
//! ends by count (`rate × duration` requests) and by time (each request within
//! [`REQUEST_TIMEOUT`], the whole drive within [`DRAIN`] past its last due time).
//!
//! The agent caps connections per client address (`MAX_CONNECTIONS_PER_IP`, 32), so the
//! pool and the streams each spread over several loopback source addresses, as several
//! clients on the host would: the pool's slot `i` binds `127.0.0.<2 + i % 8>`, stream
//! `j` binds `127.0.1.<1 + j % 5>`.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The longest one request may take before it counts as failed.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the driver waits, past the last request's due time, for the answers.
const DRAIN: Duration = Duration::from_secs(15);
/// Loopback source addresses of the pool and of the streams.
const POOL_SOURCES: usize = 8;
const STREAM_SOURCES: usize = 5;

/// What is requested, in a fixed mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Healthz,
    Pods,
    Metrics,
}

impl Kind {
    /// Six in ten requests are `/healthz`, two `/pods`, two `/metrics`.
    fn of(n: u64) -> Kind {
        match n % 10 {
            0..=5 => Kind::Healthz,
            6 | 7 => Kind::Pods,
            _ => Kind::Metrics,
        }
    }

    pub fn path(self) -> &'static str {
        match self {
            Kind::Healthz => "/healthz",
            Kind::Pods => "/pods",
            Kind::Metrics => "/metrics",
        }
    }
}

/// The load to drive.
#[derive(Debug, Clone)]
pub struct Plan {
    pub addr: SocketAddr,
    /// Requests per second.
    pub rate: u32,
    pub duration: Duration,
    /// Connections at most (the pool's slots).
    pub pool: usize,
    /// Every `close_every`-th request asks for `Connection: close`: the slot connects
    /// anew for its next request. The others reuse a kept-alive connection.
    pub close_every: u64,
}

/// One request's fate.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub kind: Kind,
    /// From the request's due time to the end of its answer.
    pub latency: Duration,
    /// From the moment it had a connection slot to the end of its answer.
    pub service: Duration,
    /// The HTTP status, or what failed (connect, write, read, timeout).
    pub result: Result<u16, String>,
}

/// What the drive did.
#[derive(Debug, Default)]
pub struct Driven {
    pub outcomes: Vec<Outcome>,
    /// Requests due but never answered within the drain.
    pub unanswered: usize,
    /// From the first due time to the last answer.
    pub elapsed: Duration,
    /// Connections the pool opened.
    pub connects: usize,
    /// Requests retried on a new connection (see [`Slot::get`]).
    pub retries: usize,
}

/// One slot of the pool: its index (which source address) and its kept-alive connection.
#[derive(Debug)]
struct Slot {
    index: usize,
    conn: Option<BufReader<TcpStream>>,
    connects: usize,
    /// Requests sent again after the agent closed their idle kept-alive connection.
    retries: usize,
}

/// Sends `plan.rate × plan.duration` GETs on schedule and collects their outcomes.
pub async fn drive(plan: &Plan) -> Driven {
    let total = u64::from(plan.rate) * plan.duration.as_secs();
    let interval = Duration::from_secs(1) / plan.rate;
    let slots: Vec<Slot> =
        (0..plan.pool).map(|index| Slot { index, conn: None, connects: 0, retries: 0 }).collect();
    let slots = Arc::new(Mutex::new(slots));
    let permits = Arc::new(Semaphore::new(plan.pool));
    let mut tasks = JoinSet::new();
    let start = Instant::now();
    for n in 0..total {
        let due = start + interval * u32::try_from(n).unwrap_or(u32::MAX);
        tokio::time::sleep_until(due).await;
        let (slots, permits, addr) = (slots.clone(), permits.clone(), plan.addr);
        let close = n % plan.close_every == 0;
        let kind = Kind::of(n);
        tasks.spawn(async move {
            // The semaphore is never closed; a slot is free whenever a permit is held.
            let _permit = permits.acquire_owned().await;
            let taken = slots.lock().ok().and_then(|mut s| s.pop());
            let Some(mut slot) = taken else {
                return Outcome {
                    kind,
                    latency: due.elapsed(),
                    service: Duration::ZERO,
                    result: Err("no free connection slot".into()),
                };
            };
            let begun = Instant::now();
            let result = tokio::time::timeout(REQUEST_TIMEOUT, slot.get(addr, kind, close))
                .await
                .unwrap_or_else(|_| Err(format!("no answer within {REQUEST_TIMEOUT:?}")));
            let outcome =
                Outcome { kind, latency: due.elapsed(), service: begun.elapsed(), result };
            if outcome.result.is_err() {
                slot.conn = None;
            }
            if let Ok(mut free) = slots.lock() {
                free.push(slot);
            }
            outcome
        });
    }
    let last_due = start + interval * u32::try_from(total).unwrap_or(u32::MAX);
    let mut driven = Driven::default();
    let mut last_answer = start;
    while let Ok(Some(joined)) = tokio::time::timeout_at(last_due + DRAIN, tasks.join_next()).await
    {
        if let Ok(outcome) = joined {
            last_answer = Instant::now();
            driven.outcomes.push(outcome);
        }
    }
    driven.unanswered = tasks.len();
    tasks.abort_all();
    driven.elapsed = last_answer.duration_since(start);
    // Dropping the slots closes their connections: the agent sees every client go.
    if let Ok(mut slots) = slots.lock() {
        driven.connects = slots.iter().map(|s| s.connects).sum();
        driven.retries = slots.iter().map(|s| s.retries).sum();
        slots.clear();
    }
    driven
}

impl Slot {
    /// One GET on this slot's connection (connecting first if it has none); the status.
    /// A kept-alive connection the agent closed as idle just as the request went out
    /// (no byte of an answer) is retried once on a new one, as HTTP clients retry an
    /// idempotent request; the retry counts in the latency.
    async fn get(&mut self, addr: SocketAddr, kind: Kind, close: bool) -> Result<u16, String> {
        let reused = self.conn.is_some();
        match self.exchange(addr, kind, close).await {
            Err(Failure::Closed) if reused => {
                self.retries += 1;
                self.conn = None;
                self.exchange(addr, kind, close).await.map_err(Failure::into_message)
            }
            result => result.map_err(Failure::into_message),
        }
    }

    async fn exchange(
        &mut self,
        addr: SocketAddr,
        kind: Kind,
        close: bool,
    ) -> Result<u16, Failure> {
        if self.conn.is_none() {
            let local = Ipv4Addr::new(127, 0, 0, 2 + (self.index % POOL_SOURCES) as u8);
            let stream =
                connect(local, addr).await.map_err(|e| Failure::Other(format!("connect: {e}")))?;
            self.connects += 1;
            self.conn = Some(BufReader::new(stream));
        }
        let Some(conn) = self.conn.as_mut() else {
            return Err(Failure::Other("no connection".into()));
        };
        let head = format!(
            "GET {} HTTP/1.1\r\nHost: {addr}\r\n{}\r\n",
            kind.path(),
            if close { "Connection: close\r\n" } else { "" }
        );
        if let Err(e) = conn.get_mut().write_all(head.as_bytes()).await {
            return Err(Failure::of("write", e));
        }
        let head = read_head(conn).await.map_err(|e| Failure::of("read", e))?;
        let ended =
            read_body(conn, &head).await.map_err(|e| Failure::Other(format!("read body: {e}")))?;
        if close || head.close || ended {
            self.conn = None;
        }
        Ok(head.status)
    }
}

/// Why a request got no answer.
#[derive(Debug)]
enum Failure {
    /// The connection was closed (or reset) before any byte of an answer.
    Closed,
    Other(String),
}

impl Failure {
    fn of(step: &str, error: std::io::Error) -> Failure {
        use std::io::ErrorKind as K;
        match error.kind() {
            K::UnexpectedEof | K::ConnectionReset | K::BrokenPipe => Failure::Closed,
            _ => Failure::Other(format!("{step}: {error}")),
        }
    }

    fn into_message(self) -> String {
        match self {
            Failure::Closed => "the connection closed before an answer".to_owned(),
            Failure::Other(message) => message,
        }
    }
}

/// A TCP connection to `addr` from the loopback address `local`.
async fn connect(local: Ipv4Addr, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(local.into(), 0))?;
    let stream = socket.connect(addr).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// A response's head, as far as reading its body needs.
#[derive(Debug)]
struct Head {
    status: u16,
    content_length: Option<u64>,
    chunked: bool,
    /// `Connection: close`.
    close: bool,
}

async fn read_head(conn: &mut BufReader<TcpStream>) -> std::io::Result<Head> {
    let mut line = String::new();
    if conn.read_line(&mut line).await? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let status = line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut head = Head { status, content_length: None, chunked: false, close: false };
    loop {
        line.clear();
        if conn.read_line(&mut line).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let header = line.trim_end();
        if header.is_empty() {
            return Ok(head);
        }
        let Some((name, value)) = header.split_once(':') else { continue };
        let value = value.trim().to_ascii_lowercase();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => head.content_length = value.parse().ok(),
            "transfer-encoding" => head.chunked = value.contains("chunked"),
            "connection" => head.close = value.contains("close"),
            _ => {}
        }
    }
}

/// Reads (and drops) the body; true if it ended with the connection (no length given).
async fn read_body(conn: &mut BufReader<TcpStream>, head: &Head) -> std::io::Result<bool> {
    if head.chunked {
        while read_chunk(conn).await? > 0 {}
        return Ok(false);
    }
    match head.content_length {
        Some(length) => {
            let mut body = (&mut *conn).take(length);
            if tokio::io::copy(&mut body, &mut tokio::io::sink()).await? < length {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            Ok(false)
        }
        None => {
            tokio::io::copy(conn, &mut tokio::io::sink()).await?;
            Ok(true)
        }
    }
}

/// Reads one chunk of a chunked body; its size (0: the last chunk, trailers read too).
async fn read_chunk(conn: &mut BufReader<TcpStream>) -> std::io::Result<u64> {
    let mut line = String::new();
    if conn.read_line(&mut line).await? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let size = line.trim_end().split(';').next().unwrap_or_default();
    let size = u64::from_str_radix(size.trim(), 16)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "bad chunk size"))?;
    if size == 0 {
        // Trailers, up to the empty line.
        loop {
            line.clear();
            if conn.read_line(&mut line).await? == 0 || line.trim_end().is_empty() {
                return Ok(0);
            }
        }
    }
    let copied = tokio::io::copy(&mut (&mut *conn).take(size + 2), &mut tokio::io::sink()).await?;
    if copied < size + 2 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(size)
}

/// One following log stream's fate.
#[derive(Debug, Clone)]
pub struct Followed {
    pub path: String,
    /// Log bytes received (chunk contents).
    pub bytes: u64,
    /// How long before the stop its last data came (`None`: no data at all).
    pub quiet_at_stop: Option<Duration>,
    /// Held until the stop (`Ok`), or what ended it early.
    pub result: Result<(), String>,
}

/// Follows `path` (a `/containerLogs/...?follow=true`) from the `index`-th stream source
/// address until `stop`; the stream must answer 200 and carry data.
pub async fn follow(
    addr: SocketAddr,
    path: String,
    index: usize,
    stop: CancellationToken,
) -> Followed {
    let mut bytes = 0;
    let mut last_data = None;
    let result = async {
        let local = Ipv4Addr::new(127, 0, 1, 1 + (index % STREAM_SOURCES) as u8);
        let stream = tokio::time::timeout(REQUEST_TIMEOUT, connect(local, addr))
            .await
            .map_err(|_| "connect timed out".to_owned())?
            .map_err(|e| format!("connect: {e}"))?;
        let mut conn = BufReader::new(stream);
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        conn.get_mut().write_all(request.as_bytes()).await.map_err(|e| format!("write: {e}"))?;
        let head = tokio::time::timeout(REQUEST_TIMEOUT, read_head(&mut conn))
            .await
            .map_err(|_| "no answer".to_owned())?
            .map_err(|e| format!("read: {e}"))?;
        if head.status != 200 || !head.chunked {
            return Err(format!("answered {} (chunked: {})", head.status, head.chunked));
        }
        loop {
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                chunk = read_chunk(&mut conn) => match chunk {
                    Ok(0) => return Err("the agent ended the stream".to_owned()),
                    Ok(size) => {
                        bytes += size;
                        last_data = Some(Instant::now());
                    }
                    Err(e) => return Err(format!("read: {e}")),
                },
            }
        }
    }
    .await;
    Followed { path, bytes, quiet_at_stop: last_data.map(|at: Instant| at.elapsed()), result }
}
