//! The registered plugins, one per resource, each with its `ListAndWatch` stream running
//! as a task of its own (`device_plugin`, with the resource in its span). Only the task
//! that owns them (`server`) changes them, so the manager's events keep a plugin's order:
//! an endpoint's stream is stopped, and its task ended, before anything is said about the
//! endpoint that replaces it, and `Stopped` is said once, by whoever removes the endpoint.

use std::collections::HashMap;
use std::path::PathBuf;

use outpost_kubelet_api::deviceplugin::v1beta1 as api;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{Instrument, info, info_span, warn};

use super::registration::Command;
use super::{Endpoint, PluginEvent};
use crate::devices::socket::{FileId, identity};

/// The manager is gone (its receiver of events was dropped): there is nobody to tell.
#[derive(Debug)]
pub(super) struct Closed;

/// A stream's end, as its task reports it to the owner.
#[derive(Debug)]
pub(super) struct Ended {
    resource: String,
    id: u64,
}

#[derive(Debug)]
struct Running {
    socket: PathBuf,
    file: FileId,
    id: u64,
    stream: JoinHandle<()>,
}

impl Running {
    /// Ends the stream's task and waits for it: nothing it sends comes after this.
    async fn stop(mut self) {
        self.stream.abort();
        let _ = (&mut self.stream).await;
    }
}

/// The registered plugins, by resource.
#[derive(Debug)]
pub(super) struct Endpoints {
    events: mpsc::Sender<PluginEvent>,
    ended: mpsc::UnboundedSender<Ended>,
    running: HashMap<String, Running>,
    next_id: u64,
}

impl Endpoints {
    /// The endpoints; their streams report their end on `ended`.
    pub(super) fn new(
        events: mpsc::Sender<PluginEvent>,
        ended: mpsc::UnboundedSender<Ended>,
    ) -> Endpoints {
        Endpoints { events, ended, running: HashMap::new(), next_id: 0 }
    }

    /// A plugin registered: its old endpoint, if any, is stopped first (without a
    /// `Stopped`: `Registered` says it is replaced), then `Registered`, then its stream.
    pub(super) async fn register(&mut self, command: Command) -> Result<(), Closed> {
        let Command { endpoint, file, done } = command;
        let resource = endpoint.resource().to_owned();
        let socket = endpoint.socket().to_owned();
        if let Some(old) = self.running.remove(&resource) {
            info!(
                resource,
                old = %old.socket.display(),
                new = %socket.display(),
                "device plugin registered again: its new endpoint replaces the old"
            );
            old.stop().await;
        }
        let registered =
            PluginEvent::Registered { resource: resource.clone(), endpoint: endpoint.clone() };
        self.events.send(registered).await.map_err(|_| Closed)?;
        let id = self.next_id;
        self.next_id += 1;
        let span = info_span!("device_plugin", resource, socket = %socket.display());
        let stream = list_and_watch(endpoint, id, self.events.clone(), self.ended.clone());
        let stream = tokio::spawn(stream.instrument(span));
        self.running.insert(resource, Running { socket, file, id, stream });
        let _ = done.send(());
        Ok(())
    }

    /// A stream ended by itself: its endpoint is stopped, unless it was replaced already.
    pub(super) async fn ended(&mut self, ended: Ended) -> Result<(), Closed> {
        if self.running.get(&ended.resource).is_none_or(|r| r.id != ended.id) {
            return Ok(());
        }
        match self.running.remove(&ended.resource) {
            Some(running) => self.stopped(ended.resource, running).await,
            None => Ok(()),
        }
    }

    /// Stops every endpoint whose socket is no longer the file it registered with (it
    /// was removed, or another was made in its place): the directory changed.
    pub(super) async fn check_sockets(&mut self) -> Result<(), Closed> {
        let gone: Vec<String> = self
            .running
            .iter()
            .filter(|(_, running)| identity(&running.socket) != Some(running.file))
            .map(|(resource, _)| resource.clone())
            .collect();
        for resource in gone {
            if let Some(running) = self.running.remove(&resource) {
                info!(resource, socket = %running.socket.display(), "device plugin's socket is gone: its endpoint is stopped");
                self.stopped(resource, running).await?;
            }
        }
        Ok(())
    }

    async fn stopped(&mut self, resource: String, running: Running) -> Result<(), Closed> {
        let socket = running.socket.clone();
        running.stop().await;
        let stopped = PluginEvent::Stopped { resource, endpoint: socket };
        self.events.send(stopped).await.map_err(|_| Closed)
    }
}

impl Drop for Endpoints {
    fn drop(&mut self) {
        for running in self.running.values() {
            running.stream.abort();
        }
    }
}

/// Why a stream ended.
enum End {
    /// The plugin ended it, or it broke.
    Plugin(Option<tonic::Status>),
    /// The manager is gone.
    Closed,
}

/// The plugin's `ListAndWatch` stream: each list is a `Devices` event; its end is
/// reported to the owner.
async fn list_and_watch(
    endpoint: Endpoint,
    id: u64,
    events: mpsc::Sender<PluginEvent>,
    ended: mpsc::UnboundedSender<Ended>,
) {
    let resource = endpoint.resource().to_owned();
    match follow(&endpoint, &events).await {
        End::Closed => return,
        End::Plugin(None) => warn!("ListAndWatch ended by the device plugin"),
        End::Plugin(Some(status)) => warn!(error = %status, "ListAndWatch ended unexpectedly"),
    }
    let _ = ended.send(Ended { resource, id });
}

async fn follow(endpoint: &Endpoint, events: &mpsc::Sender<PluginEvent>) -> End {
    let mut stream = match endpoint.client().list_and_watch(api::Empty {}).await {
        Ok(response) => response.into_inner(),
        Err(status) => return End::Plugin(Some(status)),
    };
    loop {
        let devices = match stream.message().await {
            Ok(Some(list)) => list.devices,
            Ok(None) => return End::Plugin(None),
            Err(status) => return End::Plugin(Some(status)),
        };
        let healthy = devices.iter().filter(|d| d.health == api::HEALTHY).count();
        info!(devices = devices.len(), healthy, "device plugin's device list");
        let resource = endpoint.resource().to_owned();
        if events.send(PluginEvent::Devices { resource, devices }).await.is_err() {
            return End::Closed;
        }
    }
}
