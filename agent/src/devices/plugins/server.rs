//! The `device_plugins` task: serves the Registration service on `kubelet.sock`, owns the
//! registered endpoints, and reacts to what the kernel says of the directory (inotify):
//! after any change in it, `kubelet.sock` is served again if it is no longer the socket
//! listened on, and a plugin whose socket is no longer the one it registered with is
//! stopped. Serving that fails is retried a second later, as kubelet's server retries.

use std::io;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use futures::StreamExt;
use inotify::{EventMask, EventStream, WatchDescriptor};
use outpost_core::error_chain::describe;
use outpost_kubelet_api::deviceplugin::v1beta1::{self as api, KUBELET_SOCKET};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Sleep;
use tokio_stream::wrappers::UnixListenerStream;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span, warn};

use super::directory::{self, Prepared, watch_error};
use super::endpoints::{Closed, Endpoints};
use super::registration::Registration;
use super::{Error, PluginEvent};
use crate::devices::socket::{FileId, Removal};

/// How long before `kubelet.sock` is listened on again once serving it failed (kubelet's
/// `retryInterval`).
const RETRY: Duration = Duration::from_secs(1);

/// The inotify events' buffer (a few dozen events).
const EVENTS_BUFFER: usize = 4096;

type Changes = EventStream<Vec<u8>>;

/// The task's body; see [`super::start`].
pub(super) async fn run(
    prepared: Prepared,
    events: mpsc::Sender<PluginEvent>,
    stop: CancellationToken,
) -> Result<(), Error> {
    let Prepared { dir, watch, mut watched, listener, served } = prepared;
    let mut changes: Changes =
        watch.into_event_stream(vec![0; EVENTS_BUFFER]).map_err(|e| watch_error(&dir, e))?;
    let (commands, mut registrations) = mpsc::channel(8);
    let mut kubelet = Kubelet {
        registration: Registration::new(dir.clone(), commands),
        removal: Removal { socket: dir.join(KUBELET_SOCKET), id: None },
        task: None,
    };
    kubelet.serve(listener, served)?;
    info!(socket = %kubelet.removal.socket.display(), "serving the device plugins' Registration service");
    let (ended_tx, mut ended) = mpsc::unbounded_channel();
    let mut endpoints = Endpoints::new(events, ended_tx);
    let mut retry: Option<Pin<Box<Sleep>>> = None;
    loop {
        let step = tokio::select! {
            () = stop.cancelled() => return Ok(()),
            Some(command) = registrations.recv() => endpoints.register(command).await,
            Some(end) = ended.recv() => endpoints.ended(end).await,
            change = changes.next() => {
                let event = match change {
                    Some(Ok(event)) => event,
                    Some(Err(source)) => return Err(watch_error(&dir, source)),
                    None => return Err(watch_error(&dir, io::Error::other("the inotify stream ended"))),
                };
                let gone = EventMask::DELETE_SELF | EventMask::MOVE_SELF | EventMask::IGNORED;
                if event.wd == watched && event.mask.intersects(gone) {
                    warn!(dir = %dir.display(), "the device-plugin directory was removed or moved: made again");
                    watched = rewatch(&dir, &changes, &watched)?;
                }
                if retry.is_none() && !kubelet.removal.is_current() {
                    warn!(socket = %kubelet.removal.socket.display(), "kubelet.sock was removed or replaced: serving it again");
                    retry = kubelet.listen();
                }
                endpoints.check_sockets().await
            }
            failure = kubelet.ended() => {
                warn!(error = failure, "serving kubelet.sock failed: listening again in {RETRY:?}");
                retry = Some(Box::pin(tokio::time::sleep(RETRY)));
                Ok(())
            }
            () = elapsed(&mut retry) => {
                retry = kubelet.listen();
                Ok(())
            }
        };
        if let Err(Closed) = step {
            info!("the device manager is gone: the device plugins' side stops");
            return Ok(());
        }
    }
}

/// Makes the directory again and watches it in place of the one that went.
fn rewatch(dir: &Path, changes: &Changes, old: &WatchDescriptor) -> Result<WatchDescriptor, Error> {
    directory::create(dir)?;
    let mut watches = changes.watches();
    let _ = watches.remove(old.clone());
    watches.add(dir, directory::watch_mask()).map_err(|e| watch_error(dir, e))
}

/// Waits for the retry's time, or forever without one.
async fn elapsed(retry: &mut Option<Pin<Box<Sleep>>>) {
    match retry {
        Some(sleep) => sleep.await,
        None => std::future::pending().await,
    }
}

/// `kubelet.sock`: the socket listened on and the task serving it. Dropped, it stops
/// serving and removes the socket if it is still the one it made (as Go's listener
/// removes its socket when kubelet closes it).
struct Kubelet {
    registration: Registration,
    removal: Removal,
    task: Option<JoinHandle<Result<(), tonic::transport::Error>>>,
}

impl Kubelet {
    fn serve(&mut self, listener: UnixListener, served: FileId) -> Result<(), Error> {
        self.stop();
        let socket = &self.removal.socket;
        let listener = tokio::net::UnixListener::from_std(listener)
            .map_err(|source| Error::Listen { socket: socket.clone(), source })?;
        let service = api::registration_server::RegistrationServer::new(self.registration.clone());
        let server = tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(UnixListenerStream::new(listener));
        let span = info_span!("device_plugin_registration", socket = %socket.display());
        self.task = Some(tokio::spawn(server.instrument(span)));
        self.removal.id = Some(served);
        Ok(())
    }

    /// Listens on the socket again; a failure is logged and retried after [`RETRY`] (the
    /// sleep returned).
    fn listen(&mut self) -> Option<Pin<Box<Sleep>>> {
        self.stop();
        let listened = directory::listen(&self.removal.socket)
            .and_then(|(listener, id)| self.serve(listener, id));
        match listened {
            Ok(()) => {
                info!(socket = %self.removal.socket.display(), "serving kubelet.sock again");
                None
            }
            Err(error) => {
                warn!(
                    error = describe(&error),
                    "cannot serve kubelet.sock: trying again in {RETRY:?}"
                );
                Some(Box::pin(tokio::time::sleep(RETRY)))
            }
        }
    }

    /// Waits for serving to end (an error, said), or forever while nothing is served.
    async fn ended(&mut self) -> String {
        let Some(task) = self.task.as_mut() else {
            return std::future::pending().await;
        };
        let ended = task.await;
        self.task = None;
        self.removal.id = None;
        match ended {
            Ok(Ok(())) => "the server ended".to_owned(),
            Ok(Err(error)) => describe(&error),
            Err(error) => describe(&error),
        }
    }

    fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        self.removal.id = None;
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
