//! kube-apiserver's upgrade-aware proxy to nodes: `pods/exec`, `pods/attach`,
//! `pods/portforward`, `pods/log` and `nodes/proxy`. The request is turned into the
//! node's URL as kube-apiserver's `ExecLocation`, `AttachLocation`, `PortForwardLocation`,
//! `LogLocation` and node proxy do it ([`location`], pure), sent to the node's kubelet
//! endpoint over TLS with the server's kubelet-client certificate, and the answer comes
//! back as it is. After a `101 Switching Protocols` the bytes are copied both ways
//! unchanged, as kube-apiserver did for SPDY before 1.30 and does for WebSockets from
//! 1.36: a real kubectl's own protocol reaches the node.
//!
//! The node is reached at its first address of the types kubeadm configures
//! (`--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname`) and its
//! `status.daemonEndpoints.kubeletEndpoint.Port`. The node's serving certificate is not
//! verified, as kube-apiserver without `--kubelet-certificate-authority`. The caller's
//! `Authorization` header is not passed on (kube-apiserver drops it once it has
//! authenticated the request). Simplified: no authorization of the caller, and
//! connections already upgraded outlive [`cut`](super::TestApiServer::cut).

mod location;

use std::convert::Infallible;
use std::future::ready;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt as _;
use http_body_util::{BodyExt as _, BodyStream, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{AUTHORIZATION, HOST, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

pub use self::location::{Proxied, location, route};
use super::error::{Error, Result};
use super::http::Body;
use super::resource::{NODES, PODS};
use super::store::Store;

/// The buffer each direction of an upgraded connection is copied through: kube-apiserver's
/// upgrade-aware proxy copies with Go's `io.Copy`, 32 KiB at a time (tokio's default is
/// 8 KiB).
const UPGRADED_COPY_BUFFER: usize = 32 * 1024;

/// Proxies `request` (already authenticated) to the node that `proxied` names.
pub async fn serve(
    store: &Store,
    kubelet_client: &Arc<rustls::ClientConfig>,
    mut request: Request<Incoming>,
    proxied: Proxied,
) -> Result<Response<Body>> {
    let pod = match &proxied {
        Proxied::Pod { namespace, name, .. } => Some(store.get(&PODS, Some(namespace), name)?),
        Proxied::Node { .. } => None,
    };
    let node_name = match (&proxied, &pod) {
        (Proxied::Node { name, .. }, _) => name.clone(),
        (Proxied::Pod { name, .. }, Some(pod)) => location::node_name(pod, name)?,
        (Proxied::Pod { .. }, None) => return Err(Error::Internal("no pod".into())),
    };
    let node = store.get(&NODES, None, &node_name)?;
    let query = request.uri().query().unwrap_or_default().to_owned();
    let target = location(&proxied, pod.as_ref(), &node, &query)?;
    let stream = TcpStream::connect((target.host.as_str(), target.port)).await.map_err(|e| {
        Error::Internal(format!(
            "error dialing backend: dial tcp {}:{}: {e}",
            target.host, target.port
        ))
    })?;
    // As Go's dialer sets it on every connection.
    let _ = stream.set_nodelay(true);
    let server_name = ServerName::try_from(target.host.clone())
        .map_err(|e| Error::Internal(format!("node address {}: {e}", target.host)))?;
    let tls = TlsConnector::from(kubelet_client.clone())
        .connect(server_name, stream)
        .await
        .map_err(|e| Error::Internal(format!("error dialing backend: {e}")))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| Error::Internal(format!("error dialing backend: {e}")))?;
    tokio::spawn(async move {
        let _ = connection.with_upgrades().await;
    });

    let client_upgrade = hyper::upgrade::on(&mut request);
    let (mut parts, body) = request.into_parts();
    parts.headers.remove(AUTHORIZATION);
    let authority = format!("{}:{}", target.host, target.port);
    if let Ok(host) = HeaderValue::from_str(&authority) {
        parts.headers.insert(HOST, host);
    }
    parts.uri = target
        .path_and_query
        .parse()
        .map_err(|e| Error::Internal(format!("node URL {}: {e}", target.path_and_query)))?;
    parts.version = hyper::Version::HTTP_11;
    let mut response = sender
        .send_request(Request::from_parts(parts, body))
        .await
        .map_err(|e| Error::Internal(format!("error trying to reach the node: {e}")))?;

    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
        let backend_upgrade = hyper::upgrade::on(&mut response);
        tokio::spawn(async move {
            let (Ok(client), Ok(backend)) = tokio::join!(client_upgrade, backend_upgrade) else {
                return;
            };
            let mut client = TokioIo::new(client);
            let mut backend = TokioIo::new(backend);
            // Each way in kube-apiserver's buffer size (UPGRADED_COPY_BUFFER).
            let _ = tokio::io::copy_bidirectional_with_sizes(
                &mut client,
                &mut backend,
                UPGRADED_COPY_BUFFER,
                UPGRADED_COPY_BUFFER,
            )
            .await;
        });
        let (parts, _) = response.into_parts();
        return Ok(Response::from_parts(parts, empty()));
    }
    let (parts, body) = response.into_parts();
    Ok(Response::from_parts(parts, streamed(body)))
}

/// The node's response body as it comes; an error midway ends it.
fn streamed(body: Incoming) -> Body {
    let frames = BodyStream::new(body)
        .take_while(|frame| ready(frame.is_ok()))
        .filter_map(|frame| ready(frame.ok().map(Ok::<Frame<Bytes>, Infallible>)));
    StreamBody::new(frames).boxed_unsync()
}

fn empty() -> Body {
    http_body_util::Empty::new().boxed_unsync()
}
