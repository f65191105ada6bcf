//! Opening `outpost exec`'s WebSocket to the agent: TCP, TLS for https (the operator
//! client's own configuration: trusted CAs, client certificate, `http/1.1` ALPN), then
//! the upgrade with the bearer token and the `v5.channel.k8s.io` subprotocol. An answer
//! other than 101 becomes the client's usual error (refused, not found, the agent's
//! message).

use reqwest::{StatusCode, Url};
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::{self, ClientRequestBuilder};

use super::Error;
use crate::api::exec::channel::Protocol;
use crate::commands::client::Client;

/// The connection under the WebSocket, plain or TLS.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

pub type Socket = WebSocketStream<Box<dyn Io>>;

/// Connects to `url` (an `http`/`https` URL of the local API) and upgrades.
pub async fn connect(client: &Client, url: &Url) -> Result<Socket, Error> {
    let host = url.host_str().unwrap_or_default().to_owned();
    let port = url.port_or_known_default().unwrap_or(80);
    let tcp = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port))
        .await
        .map_err(|e| client.unreachable(connect_reason(&e)))?;
    let _ = tcp.set_nodelay(true);
    let io: Box<dyn Io> = if url.scheme() == "https" {
        let name = ServerName::try_from(host.trim_matches(['[', ']']).to_owned())
            .map_err(|_| Error::Url(url.to_string()))?;
        let connector = tokio_rustls::TlsConnector::from(client.tls_config());
        let tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| client.unreachable(format!("TLS handshake failed: {e}")))?;
        Box::new(tls)
    } else {
        Box::new(tcp)
    };
    let mut ws_url = url.clone();
    let scheme = if url.scheme() == "https" { "wss" } else { "ws" };
    ws_url.set_scheme(scheme).map_err(|()| Error::Url(url.to_string()))?;
    let uri = ws_url.as_str().parse().map_err(|_| Error::Url(url.to_string()))?;
    let mut request = ClientRequestBuilder::new(uri).with_sub_protocol(Protocol::V5.name());
    if let Some(token) = client.token() {
        request = request.with_header("Authorization", format!("Bearer {token}"));
    }
    match tokio_tungstenite::client_async(request, io).await {
        Ok((socket, _)) => Ok(socket),
        Err(tungstenite::Error::Http(response)) => {
            let code = StatusCode::from_u16(response.status().as_u16())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let body = response.body().as_deref().map(String::from_utf8_lossy).unwrap_or_default();
            Err(Error::Client(client.refusal(url.to_string(), code, &body)))
        }
        Err(e) => Err(Error::Upgrade { url: url.to_string(), source: Box::new(e) }),
    }
}

/// Why the TCP connection failed, in a few words.
fn connect_reason(error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
        _ => error.to_string(),
    }
}
