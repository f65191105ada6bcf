//! B12's hops: where a forwarded byte's time goes. The same fetch of the blob as the
//! kubectl rows, through a port-forward session that a minimal SPDY/3.1 client written
//! here drives (one data and one error stream, no local listener, no copy but the
//! socket's), twice:
//!
//! - **the agent**: straight to its `/portForward`, over TLS with the API server's
//!   kubelet-client certificate (what the API server's proxy sends on);
//! - **the API server's proxy**: to `pods/web/portforward` on the test API server,
//!   which relays the upgraded connection to the agent as kube-apiserver does.
//!
//! Set beside the plain TCP copy and kubectl's own rows, they tell the agent's framing,
//! the proxy's relay and kubectl's client apart.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use outpost_formats::spdy::{Decoder, Deflater, Frame, Headers};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::BLOB_MIB;

/// Where a session goes, and how it authenticates there.
pub struct Hop {
    pub addr: SocketAddr,
    /// The upgrade's path.
    pub path: String,
    /// A bearer token (the API server's), if any.
    pub token: Option<String>,
    /// `None`: plain HTTP (the test API server without TLS).
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// A TLS client trusting `ca_pem`, presenting `identity` (certificate and key PEM) if
/// given.
pub fn tls(
    ca_pem: &str,
    identity: Option<(&str, &str)>,
) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.context("a CA certificate")?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    let mut config = match identity {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .context("the client certificate")?;
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).context("the client key")?;
            builder.with_client_auth_cert(chain, key)?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Fetches `/blob` from port 80 of the pod through one port-forward session on `hop`:
/// how long it took, from the connect to the last byte.
pub async fn fetch(hop: &Hop) -> anyhow::Result<Duration> {
    let began = Instant::now();
    let tcp = TcpStream::connect(hop.addr).await.context("connect")?;
    tcp.set_nodelay(true)?;
    match &hop.tls {
        Some(tls) => {
            let name = ServerName::from(hop.addr.ip());
            let io = TlsConnector::from(tls.clone()).connect(name, tcp).await.context("TLS")?;
            session(io, hop).await?;
        }
        None => session(tcp, hop).await?,
    }
    Ok(began.elapsed())
}

/// Upgrades `io` to a port-forward session and reads the blob through it.
async fn session<S: AsyncRead + AsyncWrite + Unpin>(mut io: S, hop: &Hop) -> anyhow::Result<()> {
    let auth = hop.token.as_ref().map(|t| format!("Authorization: Bearer {t}\r\n"));
    let request = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\n{}Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\
         X-Stream-Protocol-Version: portforward.k8s.io\r\nContent-Length: 0\r\n\r\n",
        hop.path,
        hop.addr,
        auth.unwrap_or_default()
    );
    io.write_all(request.as_bytes()).await?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if io.read(&mut byte).await? == 0 {
            bail!("the upgrade was not answered");
        }
        head.push(byte[0]);
    }
    if !head.starts_with(b"HTTP/1.1 101") {
        bail!("the upgrade was refused: {}", String::from_utf8_lossy(&head));
    }
    let mut deflater = Deflater::new();
    let mut out = Vec::new();
    for (id, kind) in [(1, "error"), (3, "data")] {
        let headers = Headers(vec![
            ("streamtype".to_owned(), kind.to_owned()),
            ("port".to_owned(), "80".to_owned()),
            ("requestid".to_owned(), "0".to_owned()),
        ]);
        Frame::syn_stream(id, deflater.deflate(&headers)).encode(&mut out);
    }
    let get = b"GET /blob HTTP/1.0\r\nHost: localhost\r\n\r\n".to_vec();
    Frame::Data { stream_id: 3, fin: true, data: get }.encode(&mut out);
    io.write_all(&out).await?;
    let mut decoder = Decoder::default();
    let mut buffer = vec![0u8; 256 * 1024];
    let mut received = 0usize;
    let wanted = BLOB_MIB * 1024 * 1024;
    while received < wanted {
        let n = io.read(&mut buffer).await?;
        if n == 0 {
            bail!("the session ended after {received} bytes");
        }
        decoder.extend(&buffer[..n]);
        while let Some(frame) = decoder.next_frame()? {
            match frame {
                Frame::Data { stream_id: 3, data, .. } => received += data.len(),
                Frame::Data { stream_id: 1, data, .. } if !data.is_empty() => {
                    bail!("the error stream: {}", String::from_utf8_lossy(&data))
                }
                Frame::RstStream { stream_id, status } => {
                    bail!("stream {stream_id} reset ({status})")
                }
                _ => {}
            }
        }
    }
    Ok(())
}
