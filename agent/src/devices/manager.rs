//! The device manager: the core's [`Devices`] behind a lock, fed by the plugins'
//! events, asked by admission for a pod's devices and by the pod workers for what a
//! container needs to use them, and checkpointed in kubelet's format after every change.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use outpost_core::devices::checkpoint::{self, Checkpoint};
use outpost_core::devices::{Allocation, Capacity, Device, Devices, Plan, choose};
use outpost_core::pod;
use outpost_kubelet_api::deviceplugin::v1beta1 as api;
use outpost_kubelet_api::prost::{self, Message as _};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::plugins::{Endpoint, PluginEvent};
use crate::error_chain::describe;

/// How long a stopped plugin's resource stays in the Node before it is 0 (kubelet's
/// `endpointStopGracePeriod`).
pub const STOP_GRACE_PERIOD: Duration = Duration::from_secs(5 * 60);

/// Why a container cannot get or use its devices (kubelet's words).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Allocation(#[from] outpost_core::devices::Error),
    #[error(transparent)]
    Plugin(#[from] super::plugins::Error),
    #[error("unknown Device Plugin {0}")]
    UnknownPlugin(String),
    #[error("device plugin {resource:?} answered with a response that does not decode: {source}")]
    Response {
        resource: String,
        #[source]
        source: prost::DecodeError,
    },
}

/// What one container gets from device plugins: the plugins' `ContainerAllocateResponse`s,
/// one per resource, in resource order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerDevices {
    pub responses: Vec<(String, api::ContainerAllocateResponse)>,
}

/// The device manager; clones share it.
#[derive(Debug, Clone)]
pub struct Manager {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<Devices>,
    endpoints: Mutex<HashMap<String, Endpoint>>,
    capacity: watch::Sender<Capacity>,
    checkpoint: PathBuf,
    boot_id: String,
    /// Admissions one at a time (kubelet's are, in its sync loop): a pod's devices are
    /// chosen and allocated before the next pod's are chosen.
    allocating: tokio::sync::Mutex<()>,
}

impl Manager {
    /// The manager as the checkpoint in `plugin_dir` left it (kubelet's
    /// `readCheckpoint`): every allocation kept, each resource registered with no device
    /// until its plugin registers again. A checkpoint that cannot be read is logged and
    /// left for the next write to replace, as kubelet does. Returns the resources whose
    /// plugins are awaited (their grace period starts now).
    pub fn open(plugin_dir: &std::path::Path, boot_id: String) -> (Manager, Vec<String>) {
        let path = plugin_dir.join(checkpoint::FILE_NAME);
        let (devices, awaited) = match std::fs::read(&path) {
            Ok(bytes) => match Checkpoint::parse(&bytes) {
                Ok(read) => Devices::from_checkpoint(read.data),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %describe(&e), "continuing after failing to read the device manager's checkpoint; device allocations may not be up to date");
                    (Devices::default(), Vec::new())
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Devices::default(), Vec::new()),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read the device manager's checkpoint; starting without it");
                (Devices::default(), Vec::new())
            }
        };
        let (capacity, _) = watch::channel(devices.capacity());
        let inner = Inner {
            state: Mutex::new(devices),
            endpoints: Mutex::new(HashMap::new()),
            capacity,
            checkpoint: path,
            boot_id,
            allocating: tokio::sync::Mutex::new(()),
        };
        (Manager { inner: Arc::new(inner) }, awaited)
    }

    /// The Node's device plugin resources, as they change.
    pub fn capacity(&self) -> watch::Receiver<Capacity> {
        self.inner.capacity.subscribe()
    }

    /// Whether `resource` is a device plugin's.
    pub fn is_device_resource(&self, resource: &str) -> bool {
        self.state().is_device_resource(resource)
    }

    /// How many devices of `resource` containers hold.
    pub fn allocated_count(&self, resource: &str) -> usize {
        self.state().allocated_count(resource)
    }

    /// Applies the plugins' events until their channel closes; resources whose plugin
    /// stays stopped past [`STOP_GRACE_PERIOD`] become 0. `awaited` are the resources
    /// [`Manager::open`] read from the checkpoint.
    pub async fn run(self, mut events: mpsc::Receiver<PluginEvent>, awaited: Vec<String>) {
        let mut deadlines: BTreeMap<String, Instant> =
            awaited.into_iter().map(|r| (r, Instant::now() + STOP_GRACE_PERIOD)).collect();
        loop {
            let next = deadlines.values().min().copied();
            let expired = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                event = events.recv() => {
                    let Some(event) = event else { return };
                    self.apply(event, &mut deadlines);
                }
                () = expired => {
                    let now = Instant::now();
                    let gone: Vec<String> =
                        deadlines.iter().filter(|(_, at)| **at <= now).map(|(r, _)| r.clone()).collect();
                    for resource in gone {
                        deadlines.remove(&resource);
                        tracing::info!(resource, "device plugin did not come back within its grace period; its resource is now 0 (D1)");
                        self.change(|devices| devices.remove(&resource));
                    }
                }
            }
        }
    }

    fn apply(&self, event: PluginEvent, deadlines: &mut BTreeMap<String, Instant>) {
        match event {
            PluginEvent::Registered { resource, endpoint } => {
                deadlines.remove(&resource);
                tracing::info!(resource, socket = %endpoint.socket().display(), "device plugin registered (D1)");
                self.endpoints().insert(resource.clone(), endpoint);
                self.change(|devices| devices.registered(&resource));
            }
            PluginEvent::Devices { resource, devices } => {
                let list = devices.into_iter().map(device).collect();
                self.change(|devices| {
                    devices.update(&resource, list);
                });
            }
            PluginEvent::Stopped { resource, endpoint } => {
                let mut endpoints = self.endpoints();
                if endpoints.get(&resource).is_some_and(|e| e.socket() == endpoint) {
                    endpoints.remove(&resource);
                    drop(endpoints);
                    tracing::warn!(
                        resource,
                        "device plugin stopped; its devices are unhealthy until it registers again (D1)"
                    );
                    deadlines.insert(resource.clone(), Instant::now() + STOP_GRACE_PERIOD);
                    self.change(|devices| devices.stopped(&resource));
                }
            }
        }
    }

    /// Gives every container of `pod` the devices it asks for (kubelet's admission
    /// handler calls `Allocate` for each init container, then each app container). With
    /// `release` (every source seen: kubelet's `sourcesReady`), the devices of pods no
    /// longer in `active` are freed first; before, a pod not seen yet may still be coming.
    pub async fn allocate_pod(
        &self,
        pod: &Pod,
        active: &BTreeSet<String>,
        release: bool,
    ) -> Result<(), Error> {
        let _turn = self.inner.allocating.lock().await;
        let uid = pod::uid(pod).to_owned();
        self.change(|devices| {
            if release {
                let mut active = active.clone();
                active.insert(uid.clone());
                devices.release_inactive(&active);
            }
            devices.begin_pod(&uid);
        });
        let Some(spec) = pod.spec.as_ref() else { return Ok(()) };
        for init in spec.init_containers.iter().flatten() {
            self.allocate_container(&uid, init).await?;
            let sidecar = init.restart_policy.as_deref() == Some("Always");
            self.change(|devices| {
                if sidecar {
                    devices.container_allocated(&uid, &init.name)
                } else {
                    devices.init_container_allocated(&uid, &init.name)
                }
            });
        }
        for container in &spec.containers {
            self.allocate_container(&uid, container).await?;
            self.change(|devices| devices.container_allocated(&uid, &container.name));
        }
        Ok(())
    }

    /// kubelet's `allocateContainerResources`: each device plugin resource the container
    /// limits, chosen and allocated.
    async fn allocate_container(&self, uid: &str, container: &Container) -> Result<(), Error> {
        for (resource, count) in self.device_limits(container) {
            let plan = self.state().plan(uid, &container.name, &resource, count)?;
            let Plan::Choose { available, must_include, size } = &plan else { continue };
            let endpoint = self.endpoints().get(&resource).cloned();
            let Some(endpoint) = endpoint else { return Err(Error::UnknownPlugin(resource)) };
            let mut candidates = available.clone();
            candidates.extend(must_include.iter().cloned());
            let preferred =
                endpoint.preferred_allocation(candidates, must_include.clone(), *size).await?;
            let chosen = choose(&plan, preferred.as_deref());
            let response = endpoint.allocate(chosen.clone()).await?;
            let bytes = response.encode_to_vec();
            self.change(|devices| devices.insert(uid, &container.name, &resource, &chosen, bytes));
        }
        Ok(())
    }

    /// What `container` of `pod` needs to use its devices (kubelet's
    /// `GetDeviceRunContainerOptions`): `PreStartContainer` first where the plugin asked
    /// for it, and an allocation made now for a device resource the container holds none
    /// of (a race at a node's restart, as kubelet covers it).
    pub async fn container_devices(
        &self,
        pod: &Pod,
        container: &Container,
    ) -> Result<ContainerDevices, Error> {
        let uid = pod::uid(pod);
        let limits = self.device_limits(container);
        if limits.iter().any(|(r, _)| self.state().allocation(uid, &container.name, r).is_none()) {
            let _turn = self.inner.allocating.lock().await;
            self.change(|devices| devices.begin_pod(uid));
            self.allocate_container(uid, container).await?;
        }
        let mut out = ContainerDevices::default();
        for (resource, _) in limits {
            let allocation = self.state().allocation(uid, &container.name, &resource).cloned();
            let Some(allocation) = allocation else { continue };
            let endpoint = self.endpoints().get(&resource).cloned();
            if let Some(endpoint) = endpoint {
                let ids = allocation.ids().into_iter().map(str::to_owned).collect();
                endpoint.pre_start(ids).await?;
            }
            let response =
                api::ContainerAllocateResponse::decode(allocation.response.as_slice())
                    .map_err(|source| Error::Response { resource: resource.clone(), source })?;
            out.responses.push((resource, response));
        }
        Ok(out)
    }

    /// The devices `container` of pod `uid` holds: each resource's allocation (the pod
    /// resources API, D4).
    pub fn container_allocations(&self, uid: &str, container: &str) -> Vec<(String, Allocation)> {
        let state = self.state();
        let held = state.pod(uid).and_then(|containers| containers.get(container));
        held.into_iter().flatten().map(|(r, a)| (r.clone(), a.clone())).collect()
    }

    /// The healthy devices, by resource, with their NUMA nodes (the pod resources API).
    pub fn allocatable_devices(&self) -> Vec<(String, Device)> {
        self.state().healthy().map(|(r, d)| (r.to_owned(), d.clone())).collect()
    }

    /// The device plugin resources `container` limits (extended resources cannot be
    /// overcommitted, so the limits say it all).
    fn device_limits(&self, container: &Container) -> Vec<(String, usize)> {
        let limits = container.resources.as_ref().and_then(|r| r.limits.as_ref());
        let state = self.state();
        let mut out: Vec<(String, usize)> = limits
            .into_iter()
            .flatten()
            .filter(|(name, _)| state.is_device_resource(name))
            .filter_map(|(name, quantity)| {
                let count =
                    outpost_core::quantity::Quantity::parse(&quantity.0).ok()?.value().ok()?;
                Some((name.clone(), usize::try_from(count).ok()?))
            })
            .filter(|(_, count)| *count > 0)
            .collect();
        out.sort();
        out
    }

    /// Changes the state, then publishes the capacity if it changed and writes the
    /// checkpoint.
    fn change<T>(&self, f: impl FnOnce(&mut Devices) -> T) -> T {
        let mut state = self.state();
        let out = f(&mut state);
        let capacity = state.capacity();
        let checkpoint = Checkpoint::new(state.checkpoint_data(), self.inner.boot_id.clone());
        drop(state);
        self.inner.capacity.send_if_modified(|current| {
            let changed = *current != capacity;
            *current = capacity;
            changed
        });
        let bytes = checkpoint.to_json();
        if let Err(e) = crate::checkpoint::write_atomically(&self.inner.checkpoint, &bytes, 0o644) {
            tracing::error!(path = %self.inner.checkpoint.display(), error = %e, "cannot write the device manager's checkpoint; an agent restart may lose device allocations");
        }
        out
    }

    fn state(&self) -> MutexGuard<'_, Devices> {
        self.inner.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn endpoints(&self) -> MutexGuard<'_, HashMap<String, Endpoint>> {
        self.inner.endpoints.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn device(device: api::Device) -> Device {
    let numa =
        device.topology.map(|t| t.nodes.into_iter().map(|n| n.id).collect()).unwrap_or_default();
    Device { healthy: device.health == api::HEALTHY, id: device.id, numa }
}
