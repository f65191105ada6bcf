//! L1's hostile rows: clients of the streaming endpoints that a node agent on an open
//! port meets, each against its own agent (with a token, one pod running `sleep`):
//!
//! - **idle upgrades**: 1,000 connections, each a WebSocket upgrade to `/exec` (`sleep`),
//!   spread over 40 loopback source addresses, held open and never written to again;
//! - **never read**: 100 WebSocket execs of `yes` whose clients never read a byte;
//! - **stream flood**: one SPDY/3.1 `/portForward` connection opening 20,000 streams
//!   (error streams of pairs that never complete) as fast as it can write them.
//!
//! Each row holds its clients for [`HOLD`] while a prober asks `/healthz` 20 times a
//! second from an address of its own; it reports the prober's latency, the agent's RSS
//! and fds at the start and at the peak, and what the clients got (upgraded, refused
//! with 429, dropped). The figures are the bounds at work: the sessions per user, the
//! streams per connection, the bounded queues of a client that does not read.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use anyhow::Context;
use outpost_formats::spdy::{Deflater, Frame, Headers};
use outpost_tests::pods::Node;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use super::{Resources, Sampler};
use crate::bench::b5_footprint::{teardown, wait_running};
use crate::report::{Entry, Stats};

const PREFIX: &str = "hostile-";
const TOKEN: &str = "l1-hostile-token";
/// How long each row holds its clients.
const HOLD: Duration = Duration::from_secs(10);
const IDLE_CONNECTIONS: usize = 1000;
const SOURCES: u8 = 40;
const NEVER_READ: usize = 100;
const FLOOD_STREAMS: u32 = 20_000;

/// What a row's clients got.
#[derive(Debug, Default)]
struct Clients {
    upgraded: usize,
    refused: usize,
    dropped: usize,
}

pub fn run() -> anyhow::Result<Vec<Entry>> {
    let node = Node::try_new().map_err(|what| anyhow::anyhow!("L1 hostile needs {what}"))?;
    let (agent, _token) = node.start_with_token(TOKEN);
    node.put(&format!("{PREFIX}0.yaml"), &manifest());
    let measured = wait_running(&agent, PREFIX, 1).and_then(|uids| Ok((uids, rows(&agent)?)));
    let uids = match &measured {
        Ok((uids, _)) => uids.clone(),
        Err(_) => crate::bench::b5_footprint::bench_uids(&agent, PREFIX)?,
    };
    teardown(&node, agent, &uids, PREFIX)?;
    measured.map(|(_, entries)| entries)
}

/// Runs the rows against `agent`, one after another.
fn rows(agent: &outpost_tests::agent::Agent) -> anyhow::Result<Vec<Entry>> {
    std::thread::sleep(Duration::from_secs(2));
    let addr: SocketAddr = agent.addr.parse().context("the agent's address")?;
    let pod = format!("{PREFIX}0-edge-1");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start a tokio runtime")?;
    let mut entries = Vec::new();
    let rows: [(&str, Row); 3] = [
        ("1,000 idle upgraded connections", Row::Idle),
        ("100 exec clients that never read", Row::NeverRead),
        ("a flood of 20,000 SPDY stream openings", Row::Flood),
    ];
    for (name, row) in rows {
        let start = Resources::take(agent.pid())?;
        let sampler = Sampler::start(agent.pid());
        let (clients, healthz) = rt.block_on(row.run(addr, &pod));
        let samples = sampler.finish();
        // Let the row's connections close before the next one starts.
        std::thread::sleep(Duration::from_secs(3));
        let end = Resources::take(agent.pid())?;
        let peak_rss = samples.iter().map(|(_, r)| r.rss_mib).fold(start.rss_mib, f64::max);
        let peak_fds = samples.iter().map(|(_, r)| r.fds).fold(start.fds, i64::max);
        let failed = healthz.iter().filter(|h| h.is_none()).count();
        let answered: Vec<Duration> = healthz.into_iter().flatten().collect();
        let round = |v: f64| (v * 10.0).round() / 10.0;
        entries.push(
            Entry::new(
                "L1",
                format!("hostile: {name}, /healthz latency"),
                "ms",
                Stats::millis(&answered),
            )
            .p99_below(50.0, "p99 < 50 ms, no /healthz failed")
            .target("no /healthz failed", failed == 0)
            .detail("healthz_failed", failed as u64)
            .detail("rss_start_mib", round(start.rss_mib))
            .detail("rss_peak_mib", round(peak_rss))
            .detail("rss_after_mib", round(end.rss_mib))
            .detail("fds_start", start.fds)
            .detail("fds_peak", peak_fds)
            .detail("fds_after", end.fds)
            .detail("upgraded", clients.upgraded as u64)
            .detail("refused_429", clients.refused as u64)
            .detail("dropped", clients.dropped as u64),
        );
    }
    Ok(entries)
}

fn manifest() -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {PREFIX}0\nspec:\n  terminationGracePeriodSeconds: 0\n  containers:\n  - name: main\n    image: {}\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"36000\"]\n",
        outpost_tests::containerd::BUSYBOX_IMAGE
    )
}

#[derive(Debug, Clone, Copy)]
enum Row {
    Idle,
    NeverRead,
    Flood,
}

impl Row {
    /// Runs the row's clients for [`HOLD`] beside the prober: what the clients got, and
    /// each probe's latency (`None`: failed).
    async fn run(self, addr: SocketAddr, pod: &str) -> (Clients, Vec<Option<Duration>>) {
        let prober = tokio::spawn(probe(addr));
        let clients = match self {
            Row::Idle => upgrades(addr, pod, IDLE_CONNECTIONS, &["sleep", "3600"]).await,
            Row::NeverRead => upgrades(addr, pod, NEVER_READ, &["yes"]).await,
            Row::Flood => flood(addr, pod).await,
        };
        let healthz = prober.await.unwrap_or_default();
        (clients, healthz)
    }
}

/// `/healthz` 20 times a second for [`HOLD`], from its own source address.
async fn probe(addr: SocketAddr) -> Vec<Option<Duration>> {
    let mut ticks = tokio::time::interval(Duration::from_millis(50));
    let until = Instant::now() + HOLD;
    let mut latencies = Vec::new();
    while Instant::now() < until {
        ticks.tick().await;
        let began = Instant::now();
        let answered = tokio::time::timeout(Duration::from_secs(5), async {
            let mut tcp = connect(Ipv4Addr::new(127, 0, 3, 1), addr).await.ok()?;
            let request = "GET /healthz HTTP/1.1\r\nHost: agent\r\nConnection: close\r\n\r\n";
            tcp.write_all(request.as_bytes()).await.ok()?;
            let mut answer = Vec::new();
            tcp.read_to_end(&mut answer).await.ok()?;
            answer.starts_with(b"HTTP/1.1 200").then_some(())
        })
        .await;
        latencies.push(matches!(answered, Ok(Some(()))).then(|| began.elapsed()));
    }
    latencies
}

/// `count` WebSocket exec upgrades of `command`, over [`SOURCES`] source addresses,
/// held for [`HOLD`] and never read past the answer's head.
async fn upgrades(addr: SocketAddr, pod: &str, count: usize, command: &[&str]) -> Clients {
    let query: String = command.iter().map(|arg| format!("command={arg}&")).collect();
    let request = format!(
        "GET /exec/default/{pod}/main?{query}output=1 HTTP/1.1\r\nHost: agent\r\n\
         Authorization: Bearer {TOKEN}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n"
    );
    let mut held = Vec::with_capacity(count);
    let mut clients = Clients::default();
    for i in 0..count {
        let source = Ipv4Addr::new(127, 0, 4, 1 + (i % usize::from(SOURCES)) as u8);
        match upgrade(source, addr, &request).await {
            Some((tcp, 101)) => {
                clients.upgraded += 1;
                held.push(tcp);
            }
            Some((tcp, 429)) => {
                clients.refused += 1;
                held.push(tcp);
            }
            _ => clients.dropped += 1,
        }
    }
    tokio::time::sleep(HOLD).await;
    drop(held);
    clients
}

/// Connects from `source`, sends `request` and reads the answer's status code (the
/// first bytes only: nothing more is read).
async fn upgrade(source: Ipv4Addr, addr: SocketAddr, request: &str) -> Option<(TcpStream, u16)> {
    let mut tcp = connect(source, addr).await.ok()?;
    tcp.write_all(request.as_bytes()).await.ok()?;
    let mut head = [0u8; 12];
    tokio::time::timeout(Duration::from_secs(5), tcp.read_exact(&mut head)).await.ok()?.ok()?;
    let code = std::str::from_utf8(&head[9..12]).ok()?.parse().ok()?;
    Some((tcp, code))
}

/// One SPDY `/portForward` connection opening [`FLOOD_STREAMS`] error streams of pairs
/// that never complete, then held for [`HOLD`].
async fn flood(addr: SocketAddr, pod: &str) -> Clients {
    let request = format!(
        "POST /portForward/default/{pod} HTTP/1.1\r\nHost: agent\r\n\
         Authorization: Bearer {TOKEN}\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\
         X-Stream-Protocol-Version: portforward.k8s.io\r\nContent-Length: 0\r\n\r\n"
    );
    let mut clients = Clients::default();
    let Some((mut tcp, 101)) = upgrade(Ipv4Addr::new(127, 0, 5, 1), addr, &request).await else {
        clients.dropped = 1;
        return clients;
    };
    clients.upgraded = 1;
    let mut deflater = Deflater::new();
    let mut batch = Vec::new();
    for n in 0..FLOOD_STREAMS {
        let id = n.to_string();
        let headers = Headers(vec![
            ("streamtype".to_owned(), "error".to_owned()),
            ("port".to_owned(), "80".to_owned()),
            ("requestid".to_owned(), id),
        ]);
        let frame = Frame::syn_stream(1 + 2 * n, deflater.deflate(&headers));
        frame.encode(&mut batch);
        if batch.len() > 64 * 1024 {
            // The agent may stop reading (or close): the flood ends there.
            let written = tokio::time::timeout(Duration::from_secs(5), tcp.write_all(&batch)).await;
            if !matches!(written, Ok(Ok(()))) {
                break;
            }
            batch.clear();
        }
    }
    let _ = tcp.write_all(&batch).await;
    // What the agent answers (SYN_REPLY, RST_STREAM) is read and dropped meanwhile.
    let mut sink = vec![0u8; 64 * 1024];
    let _ = tokio::time::timeout(HOLD, async { while let Ok(1..) = tcp.read(&mut sink).await {} })
        .await;
    clients
}

async fn connect(source: Ipv4Addr, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((source, 0)))?;
    socket.connect(addr).await
}
