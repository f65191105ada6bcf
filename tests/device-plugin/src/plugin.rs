//! The `DevicePlugin` service.

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;

use futures::Stream;
use outpost_kubelet_api::deviceplugin::v1beta1 as api;
use tonic::{Request, Response, Status};

use crate::health::Devices;
use crate::{Args, Error};

/// The plugin's devices and what `Allocate` answers besides them.
#[derive(Debug, Clone)]
pub struct Plugin {
    options: api::DevicePluginOptions,
    paths: HashMap<String, PathBuf>,
    devices: Devices,
    env: String,
    mounts: Vec<api::Mount>,
    annotations: HashMap<String, String>,
    cdi_devices: Vec<String>,
    pre_start_log: Option<PathBuf>,
    control_dir: Option<PathBuf>,
}

/// While this file is in the control directory, `Allocate` hangs.
const HANG_ALLOCATE: &str = "hang-allocate";
/// While this file is in the control directory, `ListAndWatch` sends nothing.
const HANG_LIST_AND_WATCH: &str = "hang-list-and-watch";

/// Waits while `control_dir/name` exists, saying once on stderr that `call` hangs.
async fn hang_while(control_dir: Option<&Path>, name: &str, call: &str) {
    let Some(file) = control_dir.map(|dir| dir.join(name)) else { return };
    if !file.exists() {
        return;
    }
    eprintln!("outpost-test-device-plugin: {call} hangs");
    while file.exists() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl Plugin {
    pub fn new(args: &Args, devices: Devices) -> Result<Plugin, Error> {
        let mounts = args.mounts.iter().map(|m| mount(m)).collect::<Result<_, _>>()?;
        Ok(Plugin {
            options: api::DevicePluginOptions {
                pre_start_required: args.pre_start_required,
                get_preferred_allocation_available: args.preferred_allocation,
            },
            paths: args.devices.iter().cloned().collect(),
            devices,
            env: args.env.clone(),
            mounts,
            annotations: args.annotations.iter().cloned().collect(),
            cdi_devices: args.cdi_devices.clone(),
            pre_start_log: args.pre_start_log.clone(),
            control_dir: args.control_dir.clone(),
        })
    }

    /// What this plugin asks of the node agent.
    pub fn options(&self) -> api::DevicePluginOptions {
        self.options
    }

    fn allocate_one(&self, ids: &[String]) -> Result<api::ContainerAllocateResponse, Status> {
        let mut devices = Vec::new();
        for id in ids {
            let path = self
                .paths
                .get(id)
                .ok_or_else(|| Status::invalid_argument(format!("unknown device {id:?}")))?;
            let path = path.display().to_string();
            devices.push(api::DeviceSpec {
                container_path: path.clone(),
                host_path: path,
                permissions: "rw".to_owned(),
            });
        }
        Ok(api::ContainerAllocateResponse {
            envs: HashMap::from([(self.env.clone(), ids.join(","))]),
            mounts: self.mounts.clone(),
            devices,
            annotations: self.annotations.clone(),
            cdi_devices: self
                .cdi_devices
                .iter()
                .map(|name| api::CdiDevice { name: name.clone() })
                .collect(),
        })
    }
}

fn mount(text: &str) -> Result<api::Mount, Error> {
    let bad = || Error::Mount(text.to_owned());
    let parts: Vec<&str> = text.split(':').collect();
    let (host, container, read_only) = match parts[..] {
        [host, container] => (host, container, false),
        [host, container, "ro"] => (host, container, true),
        _ => return Err(bad()),
    };
    if host.is_empty() || container.is_empty() {
        return Err(bad());
    }
    Ok(api::Mount { container_path: container.to_owned(), host_path: host.to_owned(), read_only })
}

/// The preferred devices: `must_include` first, then the lowest available IDs (in
/// string order), `size` in all.
pub fn preferred(available: &[String], must_include: &[String], size: usize) -> Vec<String> {
    let mut chosen: Vec<String> = Vec::new();
    for id in must_include {
        if !chosen.contains(id) {
            chosen.push(id.clone());
        }
    }
    let rest: BTreeSet<&String> = available.iter().filter(|id| !chosen.contains(id)).collect();
    for id in rest {
        if chosen.len() >= size {
            break;
        }
        chosen.push(id.clone());
    }
    chosen
}

type DeviceLists = Pin<Box<dyn Stream<Item = Result<api::ListAndWatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl api::device_plugin_server::DevicePlugin for Plugin {
    async fn get_device_plugin_options(
        &self,
        _: Request<api::Empty>,
    ) -> Result<Response<api::DevicePluginOptions>, Status> {
        Ok(Response::new(self.options))
    }

    type ListAndWatchStream = DeviceLists;

    async fn list_and_watch(
        &self,
        _: Request<api::Empty>,
    ) -> Result<Response<DeviceLists>, Status> {
        let mut devices = self.devices.clone();
        devices.mark_changed();
        let control = self.control_dir.clone();
        let lists =
            futures::stream::unfold((devices, control), |(mut devices, control)| async move {
                if devices.changed().await.is_err() {
                    // No health directory: the list never changes.
                    std::future::pending::<()>().await;
                }
                hang_while(control.as_deref(), HANG_LIST_AND_WATCH, "ListAndWatch").await;
                let list = devices.borrow_and_update().clone();
                Some((Ok(api::ListAndWatchResponse { devices: list }), (devices, control)))
            });
        Ok(Response::new(Box::pin(lists)))
    }

    async fn get_preferred_allocation(
        &self,
        request: Request<api::PreferredAllocationRequest>,
    ) -> Result<Response<api::PreferredAllocationResponse>, Status> {
        let container_responses = request
            .into_inner()
            .container_requests
            .iter()
            .map(|r| {
                let size = usize::try_from(r.allocation_size).unwrap_or(0);
                let ids = preferred(&r.available_device_i_ds, &r.must_include_device_i_ds, size);
                api::ContainerPreferredAllocationResponse { device_i_ds: ids }
            })
            .collect();
        Ok(Response::new(api::PreferredAllocationResponse { container_responses }))
    }

    async fn allocate(
        &self,
        request: Request<api::AllocateRequest>,
    ) -> Result<Response<api::AllocateResponse>, Status> {
        let request = request.into_inner();
        let ids: Vec<&str> = request
            .container_requests
            .iter()
            .flat_map(|r| r.devices_ids.iter().map(String::as_str))
            .collect();
        let call = format!("Allocate {}", ids.join(","));
        hang_while(self.control_dir.as_deref(), HANG_ALLOCATE, &call).await;
        let container_responses = request
            .container_requests
            .iter()
            .map(|r| self.allocate_one(&r.devices_ids))
            .collect::<Result<_, _>>()?;
        Ok(Response::new(api::AllocateResponse { container_responses }))
    }

    async fn pre_start_container(
        &self,
        request: Request<api::PreStartContainerRequest>,
    ) -> Result<Response<api::PreStartContainerResponse>, Status> {
        let ids = request.into_inner().devices_ids.join(",");
        eprintln!("outpost-test-device-plugin: PreStartContainer {ids}");
        if let Some(log) = &self.pre_start_log {
            let appended = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .and_then(|mut file| file.write_all(format!("{ids}\n").as_bytes()));
            appended.map_err(|e| {
                Status::internal(format!("cannot append to {}: {e}", log.display()))
            })?;
        }
        Ok(Response::new(api::PreStartContainerResponse {}))
    }
}

#[cfg(test)]
mod tests {
    use super::preferred;

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn preferred_keeps_must_include_then_the_lowest() {
        let available = ids(&["d3", "d1", "d2", "d0"]);
        assert_eq!(preferred(&available, &[], 2), ids(&["d0", "d1"]));
        assert_eq!(preferred(&available, &ids(&["d3"]), 2), ids(&["d3", "d0"]));
        assert_eq!(preferred(&available, &ids(&["d3", "d2"]), 1), ids(&["d3", "d2"]));
        assert_eq!(preferred(&available, &[], 9), ids(&["d0", "d1", "d2", "d3"]));
    }
}
