//! B12's stand-in node, kubectl's ceiling: the least a node can do for `kubectl
//! port-forward` and `kubectl exec`. It serves TLS, answers the SPDY/3.1 upgrade and KEP-4006's WebSocket
//! tunnel of it, and joins each data stream to a TCP connection to the pod's IP (no
//! network namespace to enter), reading the pod in 32 KiB DATA frames as kubelet's
//! `io.Copy` does: no session state, flow control, limits, authentication or logging.
//! For `kubectl exec` it answers at once that the command succeeded. The same kubectl
//! through the same API server proxy, once to this node and once to the agent, tells
//! what the agent costs apart from what kubectl and the proxy cost.
//!
//! It is registered with the API server as Node [`NODE`] (its kubelet endpoint this
//! server's port) and Pod [`POD`] bound to it, whose IP is the real pod's.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use futures::{SinkExt as _, StreamExt as _};
use outpost_formats::spdy::frame::{HEADER_LEN, data_header, rst};
use outpost_formats::spdy::{Decoder, Deflater, Frame, Headers, Inflater};
use outpost_tests::kubectl::NodeApi;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};

/// The stand-in's Node.
pub const NODE: &str = "stand-in";
/// The Pod kubectl forwards to on the stand-in.
pub const POD: &str = "web-on-stand-in";
/// The most of the pod's bytes in one DATA frame (Go's `io.Copy` buffer).
const CHUNK: usize = 32 * 1024;
/// Bytes in flight between a tunnel's WebSocket and its SPDY session.
const PIPE: usize = 64 * 1024;

/// The stand-in serving, on its own two-thread runtime (the agent's, on 2 cores); it
/// stops when dropped.
pub struct StandIn {
    _runtime: tokio::runtime::Runtime,
}

impl StandIn {
    /// Serves on a free port of 127.0.0.1, forwarding to `pod_ip`, and registers [`NODE`]
    /// and [`POD`] with the API server.
    pub fn start(node: &NodeApi, pod_ip: IpAddr) -> anyhow::Result<StandIn> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("stand-in")
            .enable_all()
            .build()?;
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0"))?;
        let port = listener.local_addr()?.port();
        runtime.spawn(accept(listener, acceptor()?, pod_ip));
        register(node, port, pod_ip)?;
        Ok(StandIn { _runtime: runtime })
    }
}

/// TLS with a fresh self-signed certificate (the proxy does not verify the node's, as
/// kube-apiserver without `--kubelet-certificate-authority`).
fn acceptor() -> anyhow::Result<TlsAcceptor> {
    let key = rcgen::KeyPair::generate()?;
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])?.self_signed(&key)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key)?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The Node (Ready, at 127.0.0.1 and `port`) and the Pod on it (Running, at `pod_ip`).
fn register(node: &NodeApi, port: u16, pod_ip: IpAddr) -> anyhow::Result<()> {
    let stand_in = json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE},
        "status": {
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    });
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": POD, "namespace": "default"},
        "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "busybox"}]},
        "status": {"phase": "Running", "podIP": pod_ip.to_string(),
                   "podIPs": [{"ip": pod_ip.to_string()}]},
    });
    for object in [stand_in, pod] {
        create_with_status(node, object)?;
    }
    Ok(())
}

fn create_with_status(node: &NodeApi, object: Value) -> anyhow::Result<()> {
    let server = node.cluster.server();
    let status = object["status"].clone();
    let mut stored = server.create(object).map_err(|e| anyhow::anyhow!("create: {e:?}"))?;
    stored["status"] = status;
    server.update_status(stored).map_err(|e| anyhow::anyhow!("update status: {e:?}"))?;
    Ok(())
}

async fn accept(listener: TcpListener, acceptor: TlsAcceptor, pod_ip: IpAddr) {
    while let Ok((tcp, _)) = listener.accept().await {
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let served = match acceptor.accept(tcp).await {
                Ok(tls) => connection(tls, pod_ip).await,
                Err(e) => Err(e.into()),
            };
            if let Err(e) = served {
                eprintln!("B12 stand-in node: {e:#}");
            }
        });
    }
}

/// What a connection asks of the stand-in.
#[derive(Debug, Clone, Copy)]
enum Asked {
    /// Forward ports to the pod at this address.
    PortForward(IpAddr),
    /// Run a command: it succeeds at once, with no output.
    Exec,
}

/// A remote command's error stream when it succeeded (v4 on).
const SUCCESS: &[u8] = br#"{"metadata":{},"status":"Success"}"#;

/// One connection from the API server's proxy: the upgrade, then the session.
async fn connection<T>(mut io: T, pod_ip: IpAddr) -> anyhow::Result<()>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let head = read_head(&mut io).await?;
    let values = |name: &str| -> Vec<String> {
        let lines = head.lines().filter_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim().eq_ignore_ascii_case(name).then_some(value)
        });
        lines.flat_map(|v| v.split(',')).map(|v| v.trim().to_owned()).collect()
    };
    let path = head.split_whitespace().nth(1).unwrap_or_default();
    let asked = if path.starts_with("/exec/") { Asked::Exec } else { Asked::PortForward(pod_ip) };
    let upgrade = values("upgrade").concat();
    let offered = |protocols: &[&str], wanted: &[&'static str]| {
        wanted.iter().copied().find(|w| protocols.contains(w))
    };
    if upgrade.eq_ignore_ascii_case("SPDY/3.1") {
        let asked_for = values("x-stream-protocol-version");
        let asked_for: Vec<&str> = asked_for.iter().map(String::as_str).collect();
        let protocol = match asked {
            Asked::Exec => offered(&asked_for, &["v4.channel.k8s.io"]),
            Asked::PortForward(_) => Some("portforward.k8s.io"),
        };
        let protocol = protocol.with_context(|| format!("no protocol it serves in {head}"))?;
        let answer = format!(
            "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\
             X-Stream-Protocol-Version: {protocol}\r\n\r\n"
        );
        io.write_all(answer.as_bytes()).await?;
        return session(io, asked).await;
    }
    if !upgrade.eq_ignore_ascii_case("websocket") {
        io.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n").await?;
        bail!("not an upgrade: {head}");
    }
    let key = values("sec-websocket-key").concat();
    let asked_for = values("sec-websocket-protocol");
    let asked_for: Vec<&str> = asked_for.iter().map(String::as_str).collect();
    let protocol = match asked {
        Asked::Exec => offered(&asked_for, &["v5.channel.k8s.io", "v4.channel.k8s.io"]),
        Asked::PortForward(_) => offered(&asked_for, &["SPDY/3.1+portforward.k8s.io"]),
    };
    let protocol = protocol.with_context(|| format!("no protocol it serves in {head}"))?;
    let accept = derive_accept_key(key.as_bytes());
    let answer = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: {protocol}\r\n\r\n"
    );
    io.write_all(answer.as_bytes()).await?;
    let mut websocket = WebSocketStream::from_raw_socket(io, Role::Server, None).await;
    if let Asked::Exec = asked {
        // The error channel (3): the command succeeded; then the close, as kubelet.
        websocket.send(Message::binary([&[3u8][..], SUCCESS].concat())).await?;
        let normal = CloseFrame { code: CloseCode::Normal, reason: "".into() };
        websocket.close(Some(normal)).await?;
        while let Some(Ok(_)) = websocket.next().await {}
        return Ok(());
    }
    let (session_side, tunnel_side) = tokio::io::duplex(PIPE);
    tokio::spawn(tunnel(websocket, tunnel_side));
    session(session_side, asked).await
}

/// The request's head, read up to its blank line and no further.
async fn read_head<T: AsyncRead + Unpin>(io: &mut T) -> anyhow::Result<String> {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 64 * 1024 {
            bail!("a request head over 64 KiB");
        }
        head.push(io.read_u8().await.context("the request's head")?);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

/// The WebSocket's binary messages to and from the session's byte stream.
async fn tunnel<T>(websocket: WebSocketStream<T>, bytes: tokio::io::DuplexStream)
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut messages) = websocket.split();
    let (mut from_session, mut to_session) = tokio::io::split(bytes);
    let inbound = async move {
        while let Some(Ok(message)) = messages.next().await {
            match message {
                Message::Binary(data) if to_session.write_all(&data).await.is_err() => break,
                Message::Close(_) => break,
                _ => {}
            }
        }
        let _ = to_session.shutdown().await;
    };
    let outbound = async move {
        let mut buffer = vec![0u8; PIPE];
        while let Ok(n @ 1..) = from_session.read(&mut buffer).await {
            if sink.send(Message::binary(buffer[..n].to_vec())).await.is_err() {
                return;
            }
        }
        let _ = sink.close().await;
    };
    tokio::join!(inbound, outbound);
}

/// The SPDY/3.1 server side. Port-forward: each data stream joined to a connection to
/// its port on the pod, its error stream (the same `requestid`) finished with it. Exec:
/// the command's success on the error stream, and each output stream finished, as they
/// open.
async fn session<T>(io: T, asked: Asked) -> anyhow::Result<()>
where
    T: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut read, write) = tokio::io::split(io);
    let (out, frames) = mpsc::channel::<Vec<u8>>(64);
    let writer = tokio::spawn(write_frames(write, frames));
    let (mut decoder, mut inflater, mut deflater) =
        (Decoder::default(), Inflater::new(64 * 1024), Deflater::new());
    let mut to_pod: HashMap<u32, OwnedWriteHalf> = HashMap::new();
    let mut error_streams: HashMap<String, u32> = HashMap::new();
    let mut buffer = vec![0u8; 64 * 1024];
    'read: loop {
        let n = read.read(&mut buffer).await?;
        if n == 0 {
            break;
        }
        decoder.extend(&buffer[..n]);
        while let Some(frame) = decoder.next_frame()? {
            match frame {
                Frame::SynStream { stream_id, header_block, .. } => {
                    let headers = inflater.inflate(&header_block)?;
                    let block = deflater.deflate(&Headers(Vec::new()));
                    let reply = Frame::SynReply { stream_id, fin: false, header_block: block };
                    out.send(reply.to_bytes()).await?;
                    let request = headers.get("requestid").unwrap_or_default().to_owned();
                    match (asked, headers.get("streamtype")) {
                        (Asked::Exec, Some("error")) => {
                            let status = Frame::Data { stream_id, fin: true, data: SUCCESS.into() };
                            out.send(status.to_bytes()).await?;
                        }
                        (Asked::Exec, Some("stdout" | "stderr")) => {
                            out.send(data_header(stream_id, true, 0).to_vec()).await?;
                        }
                        (Asked::Exec, Some("stdin" | "resize")) => {}
                        (Asked::PortForward(_), Some("error")) => {
                            error_streams.insert(request, stream_id);
                        }
                        (Asked::PortForward(pod_ip), Some("data")) => {
                            let port: u16 = headers
                                .get("port")
                                .and_then(|p| p.parse().ok())
                                .context("a data stream without a port")?;
                            let tcp = TcpStream::connect((pod_ip, port)).await?;
                            tcp.set_nodelay(true)?;
                            let (from, into) = tcp.into_split();
                            to_pod.insert(stream_id, into);
                            let error = error_streams.remove(&request);
                            tokio::spawn(from_pod(from, stream_id, error, out.clone()));
                        }
                        _ => {
                            let status = rst::PROTOCOL_ERROR;
                            out.send(Frame::RstStream { stream_id, status }.to_bytes()).await?;
                        }
                    }
                }
                Frame::Data { stream_id, fin, data } => {
                    if let Some(into) = to_pod.get_mut(&stream_id)
                        && into.write_all(&data).await.is_err()
                    {
                        to_pod.remove(&stream_id);
                    }
                    if fin && let Some(mut into) = to_pod.remove(&stream_id) {
                        let _ = into.shutdown().await;
                    }
                }
                Frame::RstStream { stream_id, .. } => drop(to_pod.remove(&stream_id)),
                Frame::Ping { id } => out.send(Frame::Ping { id }.to_bytes()).await?,
                Frame::GoAway { .. } => break 'read,
                _ => {}
            }
        }
    }
    drop(out);
    Ok(writer.await??)
}

/// The pod's bytes on `stream`, read straight into DATA frames; at their end, FIN on
/// the data stream and on its error stream.
async fn from_pod(
    mut from: OwnedReadHalf,
    stream: u32,
    error: Option<u32>,
    out: mpsc::Sender<Vec<u8>>,
) {
    loop {
        let mut frame = vec![0u8; HEADER_LEN + CHUNK];
        let n = from.read(&mut frame[HEADER_LEN..]).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        frame.truncate(HEADER_LEN + n);
        frame[..HEADER_LEN].copy_from_slice(&data_header(stream, false, n));
        if out.send(frame).await.is_err() {
            return;
        }
    }
    for id in std::iter::once(stream).chain(error) {
        let _ = out.send(data_header(id, true, 0).to_vec()).await;
    }
}

/// Writes the frames queued, flushing when the queue is empty (TLS holds what is not
/// flushed).
async fn write_frames<W: AsyncWrite>(
    write: W,
    mut frames: mpsc::Receiver<Vec<u8>>,
) -> std::io::Result<()> {
    let mut write = std::pin::pin!(write);
    while let Some(frame) = frames.recv().await {
        write.write_all(&frame).await?;
        while let Ok(more) = frames.try_recv() {
            write.write_all(&more).await?;
        }
        write.flush().await?;
    }
    write.shutdown().await
}
