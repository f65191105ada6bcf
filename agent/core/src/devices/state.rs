//! The device manager's state: the registered resources and their devices, and what
//! each container was given. Every decision is kubelet's (`ManagerImpl` in
//! `devicemanager/manager.go`); the agent calls the plugins in between.

use std::collections::{BTreeMap, BTreeSet};

use super::NO_NUMA_NODE;
use super::checkpoint::{Data, Entry};

/// A plugin's device, as its `ListAndWatch` reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub id: String,
    pub healthy: bool,
    /// The NUMA nodes the plugin gave (empty: none).
    pub numa: Vec<i64>,
}

/// What one container was given of one resource: the devices by NUMA node, and the
/// plugin's `ContainerAllocateResponse` (protobuf-encoded, as the checkpoint keeps it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allocation {
    pub devices: BTreeMap<i64, Vec<String>>,
    pub response: Vec<u8>,
}

impl Allocation {
    /// The device ids, sorted.
    pub fn ids(&self) -> BTreeSet<&str> {
        self.devices.values().flatten().map(String::as_str).collect()
    }
}

/// The Node's device plugin resources: capacity (every device) and allocatable (the
/// healthy ones). A resource whose plugin is gone for good stays at 0 in both, as
/// kubelet reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capacity {
    pub capacity: BTreeMap<String, u64>,
    pub allocatable: BTreeMap<String, u64>,
}

/// What must happen for one container's devices of one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// The container has them already (it restarted, or the agent did): nothing to call.
    Allocated,
    /// Choose `size` devices: all of `must_include` (an init container's, reused), the
    /// rest from `available` (the plugin's `GetPreferredAllocation` may say which).
    Choose { available: Vec<String>, must_include: Vec<String>, size: usize },
}

/// Why a container cannot get its devices: kubelet's words (admission says
/// "Allocate failed due to <this>, which is unexpected").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(
        "pod {pod:?} container {container:?} changed request for resource {resource:?} from {had} to {wants}"
    )]
    Changed { pod: String, container: String, resource: String, had: usize, wants: usize },
    #[error("cannot allocate unregistered device {0}")]
    Unregistered(String),
    #[error("no healthy devices present; cannot allocate unhealthy devices {0}")]
    NoHealthy(String),
    #[error(
        "requested number of devices unavailable for {resource}. Requested: {requested}, Available: {available}"
    )]
    Unavailable { resource: String, requested: usize, available: usize },
}

#[derive(Debug, Clone, Default)]
struct Resource {
    devices: BTreeMap<String, Device>,
}

/// The device manager's state. Pods are by UID, containers by name.
#[derive(Debug, Clone, Default)]
pub struct Devices {
    resources: BTreeMap<String, Resource>,
    /// Resources whose plugin stopped and did not come back in time: 0 in the Node.
    removed: BTreeSet<String>,
    pods: BTreeMap<String, BTreeMap<String, BTreeMap<String, Allocation>>>,
    /// The pod being admitted's init containers' devices, which its next containers take
    /// first (kubelet's `devicesToReuse`), by resource.
    reuse: Option<(String, BTreeMap<String, BTreeSet<String>>)>,
}

impl Devices {
    /// A plugin registered for `resource`. Its devices, if it had registered before,
    /// stay until its new list arrives.
    pub fn registered(&mut self, resource: &str) {
        self.removed.remove(resource);
        self.resources.entry(resource.to_owned()).or_default();
    }

    /// The plugin's whole device list. Returns whether the Node's capacity changed.
    pub fn update(&mut self, resource: &str, devices: Vec<Device>) -> bool {
        let before = self.capacity();
        self.removed.remove(resource);
        let entry = self.resources.entry(resource.to_owned()).or_default();
        entry.devices = devices.into_iter().map(|d| (d.id.clone(), d)).collect();
        before != self.capacity()
    }

    /// The plugin stopped: its devices stay in capacity, none allocatable (kubelet's
    /// `markResourceUnhealthy`), until it registers again or [`Devices::remove`].
    pub fn stopped(&mut self, resource: &str) {
        if let Some(entry) = self.resources.get_mut(resource) {
            entry.devices.values_mut().for_each(|d| d.healthy = false);
        }
    }

    /// The plugin stayed stopped past the grace period: the resource is 0 in the Node.
    pub fn remove(&mut self, resource: &str) {
        if self.resources.remove(resource).is_some() {
            self.removed.insert(resource.to_owned());
        }
    }

    /// Whether `resource` is a device plugin's (kubelet's `isDevicePluginResource`:
    /// registered, or held by a container).
    pub fn is_device_resource(&self, resource: &str) -> bool {
        self.resources.contains_key(resource)
            || self.pods.values().flat_map(BTreeMap::values).any(|c| c.contains_key(resource))
    }

    /// The Node's device plugin resources.
    pub fn capacity(&self) -> Capacity {
        let mut out = Capacity::default();
        for (name, resource) in &self.resources {
            let all = resource.devices.len() as u64;
            let healthy = resource.devices.values().filter(|d| d.healthy).count() as u64;
            out.capacity.insert(name.clone(), all);
            out.allocatable.insert(name.clone(), healthy);
        }
        for name in &self.removed {
            out.capacity.insert(name.clone(), 0);
            out.allocatable.insert(name.clone(), 0);
        }
        out
    }

    /// How many devices of `resource` containers hold.
    pub fn allocated_count(&self, resource: &str) -> usize {
        self.in_use(resource).len()
    }

    /// The healthy devices, by resource (the pod resources API's allocatable ones).
    pub fn healthy(&self) -> impl Iterator<Item = (&str, &Device)> {
        self.resources.iter().flat_map(|(name, r)| {
            r.devices.values().filter(|d| d.healthy).map(move |d| (name.as_str(), d))
        })
    }

    /// Starts the admission of pod `uid`: the reuse of another pod's init containers'
    /// devices ends (kubelet keeps `devicesToReuse` for the pod being admitted only).
    pub fn begin_pod(&mut self, uid: &str) {
        if self.reuse.as_ref().is_none_or(|(pod, _)| pod != uid) {
            self.reuse = Some((uid.to_owned(), BTreeMap::new()));
        }
    }

    /// What `container` of pod `uid` needs to hold `required` devices of `resource`.
    pub fn plan(
        &self,
        uid: &str,
        container: &str,
        resource: &str,
        required: usize,
    ) -> Result<Plan, Error> {
        if let Some(had) = self.allocation(uid, container, resource) {
            let had = had.ids().len();
            if had != required {
                return Err(Error::Changed {
                    pod: uid.to_owned(),
                    container: container.to_owned(),
                    resource: resource.to_owned(),
                    had,
                    wants: required,
                });
            }
            return Ok(Plan::Allocated);
        }
        if required == 0 {
            return Ok(Plan::Allocated);
        }
        let Some(registered) = self.resources.get(resource) else {
            return Err(Error::Unregistered(resource.to_owned()));
        };
        let healthy: BTreeSet<&str> =
            registered.devices.values().filter(|d| d.healthy).map(|d| d.id.as_str()).collect();
        if healthy.is_empty() {
            return Err(Error::NoHealthy(resource.to_owned()));
        }
        let reusable = self.reusable(uid, resource);
        let must_include: Vec<String> = reusable
            .iter()
            .filter(|id| healthy.contains(id.as_str()))
            .take(required)
            .cloned()
            .collect();
        let needed = required - must_include.len();
        let in_use = self.in_use(resource);
        let available: Vec<String> = healthy
            .iter()
            .filter(|id| !in_use.contains(*id) && !must_include.iter().any(|m| m == *id))
            .map(|id| (*id).to_owned())
            .collect();
        if available.len() < needed {
            return Err(Error::Unavailable {
                resource: resource.to_owned(),
                requested: needed,
                available: available.len(),
            });
        }
        Ok(Plan::Choose { available, must_include, size: required })
    }

    /// The allocation of `container`'s devices of `resource`, as the plugin answered it.
    pub fn insert(
        &mut self,
        uid: &str,
        container: &str,
        resource: &str,
        ids: &[String],
        response: Vec<u8>,
    ) {
        let numa_of = |id: &String| {
            let device = self.resources.get(resource).and_then(|r| r.devices.get(id));
            device.and_then(|d| d.numa.first().copied()).unwrap_or(NO_NUMA_NODE)
        };
        let mut devices: BTreeMap<i64, Vec<String>> = BTreeMap::new();
        for id in ids {
            devices.entry(numa_of(id)).or_default().push(id.clone());
        }
        self.pods
            .entry(uid.to_owned())
            .or_default()
            .entry(container.to_owned())
            .or_default()
            .insert(resource.to_owned(), Allocation { devices, response });
    }

    /// `container`, an init container that runs to completion, was given its devices:
    /// the pod's next containers take them first (kubelet's
    /// `addContainerAllocatedResources`).
    pub fn init_container_allocated(&mut self, uid: &str, container: &str) {
        let held = self.held(uid, container);
        if let Some((pod, reuse)) = self.reuse.as_mut().filter(|(pod, _)| pod == uid) {
            let _ = pod;
            for (resource, ids) in held {
                reuse.entry(resource).or_default().extend(ids);
            }
        }
    }

    /// `container`, an app container or a sidecar, was given its devices: it keeps them
    /// for the pod's life, so no later container reuses them (kubelet's
    /// `removeContainerAllocatedResources`).
    pub fn container_allocated(&mut self, uid: &str, container: &str) {
        let held = self.held(uid, container);
        if let Some((_, reuse)) = self.reuse.as_mut().filter(|(pod, _)| pod == uid) {
            for (resource, ids) in held {
                if let Some(set) = reuse.get_mut(&resource) {
                    set.retain(|id| !ids.contains(id));
                }
            }
        }
    }

    /// Frees the devices of every pod not in `active` (kubelet's
    /// `updateAllocatedDevices`). Returns whether any were freed.
    pub fn release_inactive(&mut self, active: &BTreeSet<String>) -> bool {
        let before = self.pods.len();
        self.pods.retain(|uid, _| active.contains(uid));
        before != self.pods.len()
    }

    /// Pod `uid`'s containers' allocations.
    pub fn pod(&self, uid: &str) -> Option<&BTreeMap<String, BTreeMap<String, Allocation>>> {
        self.pods.get(uid)
    }

    /// `container`'s allocation of `resource`.
    pub fn allocation(&self, uid: &str, container: &str, resource: &str) -> Option<&Allocation> {
        self.pods.get(uid)?.get(container)?.get(resource)
    }

    /// The checkpoint's data: every allocation, and each resource's healthy devices.
    pub fn checkpoint_data(&self) -> Data {
        let mut entries = Vec::new();
        for (uid, containers) in &self.pods {
            for (container, resources) in containers {
                for (resource, allocation) in resources {
                    let devices = allocation
                        .devices
                        .iter()
                        .map(|(numa, ids)| (*numa, Some(ids.clone())))
                        .collect();
                    entries.push(Entry {
                        pod_uid: uid.clone(),
                        container: container.clone(),
                        resource: resource.clone(),
                        devices: Some(devices),
                        response: Some(allocation.response.clone()),
                    });
                }
            }
        }
        let registered = self
            .resources
            .iter()
            .map(|(name, r)| {
                let healthy = r.devices.values().filter(|d| d.healthy).map(|d| d.id.clone());
                (name.clone(), Some(healthy.collect()))
            })
            .collect();
        Data { entries: (!entries.is_empty()).then_some(entries), registered: Some(registered) }
    }

    /// The state an agent restart begins with (kubelet's `readCheckpoint`): every
    /// allocation, and each resource registered with no device until its plugin
    /// registers again. Returns the resources, whose plugins are stopped until then.
    pub fn from_checkpoint(data: Data) -> (Devices, Vec<String>) {
        let mut devices = Devices::default();
        for entry in data.entries.into_iter().flatten() {
            let by_numa: BTreeMap<i64, Vec<String>> = entry
                .devices
                .into_iter()
                .flatten()
                .map(|(numa, ids)| (numa, ids.unwrap_or_default()))
                .collect();
            let allocation =
                Allocation { devices: by_numa, response: entry.response.unwrap_or_default() };
            devices
                .pods
                .entry(entry.pod_uid)
                .or_default()
                .entry(entry.container)
                .or_default()
                .insert(entry.resource, allocation);
        }
        let resources: Vec<String> =
            data.registered.into_iter().flatten().map(|(name, _)| name).collect();
        for name in &resources {
            devices.resources.insert(name.clone(), Resource::default());
        }
        (devices, resources)
    }

    fn in_use(&self, resource: &str) -> BTreeSet<&str> {
        let containers = self.pods.values().flat_map(BTreeMap::values);
        containers.filter_map(|c| c.get(resource)).flat_map(Allocation::ids).collect()
    }

    fn reusable(&self, uid: &str, resource: &str) -> Vec<String> {
        match &self.reuse {
            Some((pod, reuse)) if pod == uid => {
                reuse.get(resource).into_iter().flatten().cloned().collect()
            }
            _ => Vec::new(),
        }
    }

    fn held(&self, uid: &str, container: &str) -> Vec<(String, Vec<String>)> {
        let resources = self.pods.get(uid).and_then(|c| c.get(container));
        let held = resources.into_iter().flatten();
        held.map(|(r, a)| (r.clone(), a.ids().into_iter().map(str::to_owned).collect())).collect()
    }
}

/// The devices a [`Plan::Choose`] gives, as kubelet's `devicesToAllocate` picks them on a
/// node without a topology manager: the reused ones, then the plugin's preferred ones
/// that are available, then the available ones in order.
pub fn choose(plan: &Plan, preferred: Option<&[String]>) -> Vec<String> {
    let Plan::Choose { available, must_include, size } = plan else {
        return Vec::new();
    };
    let mut chosen: Vec<String> = must_include.iter().take(*size).cloned().collect();
    let preferred = preferred.into_iter().flatten().filter(|id| available.contains(id));
    for id in preferred.chain(available.iter()) {
        if chosen.len() >= *size {
            break;
        }
        if !chosen.contains(id) {
            chosen.push(id.clone());
        }
    }
    chosen
}

/// kubelet's `IsExtendedResourceName`: a resource name with a domain, outside
/// `kubernetes.io/`, not a quota's `requests.` name, and a valid qualified name.
pub fn is_extended_resource(name: &str) -> bool {
    let Some((prefix, rest)) = name.split_once('/') else {
        return false;
    };
    let native = name.contains("kubernetes.io/");
    let label = |s: &str| {
        !s.is_empty()
            && s.len() <= 63
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
            && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && s.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
    };
    // The domain is a DNS subdomain with quota's `requests.` before it: 244 characters.
    let domain = "requests.".len() + prefix.len() <= 253
        && prefix.split('.').all(|part| {
            !part.is_empty()
                && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        });
    !native && !name.starts_with("requests.") && domain && label(rest)
}
