//! K6: a pod's running containers resized in place, as kubelet's `doPodResizeAction`:
//! the pod's cgroup and the containers' (containerd's `UpdateTask`) in
//! [`resize::order`], then the new resources recorded in each container's labels, so
//! that an agent restart finds them.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use oci_spec::runtime::{LinuxCpu, LinuxMemory, LinuxResources};
use outpost_core::pod_worker::ResizeContainer;
use outpost_core::resize::{self, Amounts, Resource, Step};
use outpost_core::resource_config::{self, CPU_PERIOD, milli_cpu_to_quota, milli_cpu_to_shares};

use super::Pods;
use crate::error_chain::describe;
use crate::runtime::container::{self, LABEL_RESOURCES};
use crate::runtime::spec::SwapController;

/// Resizes `containers` of `pod` (with its allocated resources) from `actual` (the pod
/// with the resources they run with): the containers updated, and the error that stopped
/// the resize (then none counts as updated).
pub(super) async fn resize(
    pods: &Pods,
    pod: &Pod,
    actual: &Pod,
    containers: &[ResizeContainer],
) -> (Vec<(String, ResourceRequirements)>, Option<String>) {
    let began = Instant::now();
    let old = resource_config::for_pod(actual, None);
    let new = resource_config::for_pod(pod, None);
    let changed: BTreeSet<Resource> = containers.iter().flat_map(|c| c.changed.clone()).collect();
    let changed: Vec<Resource> = changed.into_iter().collect();
    for step in resize::order(&old, &new, &changed) {
        let result = match step {
            Step::PodCgroup(resource) => {
                pods.settings.cgroups.resize_pod(pod, resource).map_err(|e| {
                    format!(
                        "cannot set the pod's cgroup {} limits: {}",
                        resource.as_str(),
                        describe(&e)
                    )
                })
            }
            Step::Containers(resource) => update(pods, containers, resource).await,
        };
        if let Err(error) = result {
            return (Vec::new(), Some(error));
        }
    }
    let applied: Vec<(String, ResourceRequirements)> =
        containers.iter().map(|c| (c.container_id.clone(), c.resources.clone())).collect();
    for (id, resources) in &applied {
        let value = serde_json::to_string(resources).unwrap_or_default();
        let labels = HashMap::from([(LABEL_RESOURCES.to_owned(), value)]);
        if let Err(e) = container::label(&pods.containerd, id, labels).await {
            tracing::warn!(container_id = id, error = %describe(&e), "cannot record the resized resources in the container's labels");
        }
    }
    tracing::info!(
        pod.uid = outpost_core::pod::uid(pod),
        containers = containers.len(),
        took_us = began.elapsed().as_micros(),
        "resized containers in place"
    );
    (applied, None)
}

/// Updates `resource` of each container that changes it.
async fn update(
    pods: &Pods,
    containers: &[ResizeContainer],
    resource: Resource,
) -> Result<(), String> {
    let swap = pods.settings.swap.controller;
    for c in containers.iter().filter(|c| c.changed.contains(&resource)) {
        let resources = linux_resources(&Amounts::of(Some(&c.resources)), resource, swap);
        container::update_resources(&pods.containerd, &c.container_id, &resources)
            .await
            .map_err(|e| describe(&e))?;
    }
    Ok(())
}

/// The runtime spec's resources of `resource` at `amounts`, as the container was
/// created with them (Q2; D6: on cgroup v1 with swap accounting, memory and swap together
/// limited to the memory limit).
fn linux_resources(amounts: &Amounts, resource: Resource, swap: SwapController) -> LinuxResources {
    let mut resources = LinuxResources::default();
    match resource {
        Resource::Cpu => {
            let mut cpu = LinuxCpu::default();
            cpu.set_shares(Some(milli_cpu_to_shares(amounts.cpu_request.unwrap_or(0))));
            if let Some(limit) = amounts.cpu_limit.filter(|l| *l > 0) {
                cpu.set_quota(Some(milli_cpu_to_quota(limit))).set_period(Some(CPU_PERIOD));
            }
            resources.set_cpu(Some(cpu));
        }
        Resource::Memory => {
            if let Some(limit) = amounts.memory_limit.filter(|l| *l > 0) {
                let mut memory = LinuxMemory::default();
                memory.set_limit(Some(limit));
                if swap == SwapController::MemorySwap {
                    memory.set_swap(Some(limit));
                }
                resources.set_memory(Some(memory));
            }
        }
    }
    resources
}
