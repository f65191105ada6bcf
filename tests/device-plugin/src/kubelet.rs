//! The plugin's life beside the node agent: it serves on its socket and registers with
//! `kubelet.sock`; when `kubelet.sock` is made again (the agent restarted, and removed
//! the plugins' sockets), it serves on a new socket and registers again.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use hyper_util::rt::TokioIo;
use inotify::{Inotify, WatchMask};
use outpost_kubelet_api::deviceplugin::v1beta1::{self as api, KUBELET_SOCKET};
use tokio::net::{UnixListener, UnixStream};
use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::plugin::Plugin;
use crate::{Args, Error, health};

/// How often, and how many times, `kubelet.sock` is dialled before giving up (it may be
/// made a moment before it listens).
const DIAL_PAUSE: Duration = Duration::from_millis(100);
const DIAL_TRIES: u32 = 100;

/// Serves and registers until SIGTERM or SIGINT, then removes the plugin's socket.
pub async fn run(args: Args) -> Result<(), Error> {
    let ids = args.devices.iter().map(|(id, _)| id.clone()).collect();
    let (devices, _health) = health::follow(ids, args.health_dir.clone())?;
    let plugin = Plugin::new(&args, devices)?;
    let dir = args.plugin_dir.clone();
    let socket = dir.join(&args.socket);
    let kubelet = dir.join(KUBELET_SOCKET);
    let watch_error = |source| Error::Watch { dir: dir.clone(), source };
    // Watched before kubelet.sock is looked for: one made after this is seen.
    let inotify = Inotify::init().map_err(watch_error)?;
    inotify.watches().add(&dir, WatchMask::CREATE | WatchMask::MOVED_TO).map_err(watch_error)?;
    let mut changes = inotify.into_event_stream(vec![0; 4096]).map_err(watch_error)?;
    let signal_error = |source| Error::Serve { socket: socket.clone(), source };
    let mut terminate = signal(SignalKind::terminate()).map_err(signal_error)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(signal_error)?;
    let mut server = serve(&plugin, &socket)?;
    if kubelet.exists() {
        register(&args, &plugin, &kubelet).await?;
    } else {
        eprintln!("outpost-test-device-plugin: waiting for {}", kubelet.display());
    }
    loop {
        tokio::select! {
            change = changes.next() => {
                let event = match change {
                    Some(Ok(event)) => event,
                    Some(Err(source)) => return Err(watch_error(source)),
                    None => return Err(watch_error(io::Error::other("the inotify stream ended"))),
                };
                if event.name.is_some_and(|name| name == KUBELET_SOCKET) {
                    eprintln!("outpost-test-device-plugin: {} made again: serving and registering again", kubelet.display());
                    server.abort();
                    server = serve(&plugin, &socket)?;
                    register(&args, &plugin, &kubelet).await?;
                }
            }
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
        }
    }
    server.abort();
    let _ = std::fs::remove_file(&socket);
    Ok(())
}

/// Serves the `DevicePlugin` service on a new socket at `socket`.
fn serve(plugin: &Plugin, socket: &Path) -> Result<JoinHandle<()>, Error> {
    let error = |source| Error::Serve { socket: socket.to_owned(), source };
    match std::fs::remove_file(socket) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(error(e)),
        _ => {}
    }
    let listener = UnixListener::bind(socket).map_err(error)?;
    let service = api::device_plugin_server::DevicePluginServer::new(plugin.clone());
    let server = tonic::transport::Server::builder()
        .add_service(service)
        .serve_with_incoming(UnixListenerStream::new(listener));
    let socket = socket.to_owned();
    Ok(tokio::spawn(async move {
        if let Err(error) = server.await {
            eprintln!("outpost-test-device-plugin: serving on {}: {error}", socket.display());
        }
    }))
}

/// Registers with `kubelet.sock`: the plugin's socket (its file name), resource, API
/// version and options.
async fn register(args: &Args, plugin: &Plugin, kubelet: &Path) -> Result<(), Error> {
    let channel = dial(kubelet).await?;
    let request = api::RegisterRequest {
        version: args.api_version.clone(),
        endpoint: args.socket.clone(),
        resource_name: args.resource.clone(),
        options: Some(plugin.options()),
    };
    let mut client = api::registration_client::RegistrationClient::new(channel);
    client.register(request).await.map_err(|status| Error::Refused {
        resource: args.resource.clone(),
        socket: kubelet.to_owned(),
        status,
    })?;
    eprintln!(
        "outpost-test-device-plugin: registered {} with {}",
        args.resource,
        kubelet.display()
    );
    Ok(())
}

async fn dial(socket: &Path) -> Result<Channel, Error> {
    let mut tries = 0;
    loop {
        match connect(socket.to_owned()).await {
            Ok(channel) => return Ok(channel),
            Err(source) if tries + 1 >= DIAL_TRIES => {
                return Err(Error::Dial { socket: socket.to_owned(), source });
            }
            Err(_) => {
                tries += 1;
                tokio::time::sleep(DIAL_PAUSE).await;
            }
        }
    }
}

async fn connect(socket: PathBuf) -> Result<Channel, tonic::transport::Error> {
    // The URI is not used: the connector dials the socket.
    Endpoint::from_static("http://[::]:50051")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move { Ok::<_, io::Error>(TokioIo::new(UnixStream::connect(socket).await?)) }
        }))
        .await
}
