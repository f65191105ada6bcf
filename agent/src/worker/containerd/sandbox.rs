//! A pod's sandbox without a pause container: namespaces held by bind mounts (and the
//! shared pid namespace by a tiny init, `netns::pid`), the network wired by CNI, the
//! pod's `/dev/shm` tmpfs in its run directory, the pod directory with /etc/hosts,
//! resolv.conf and volumes.
//! Setting up is idempotent, so after an agent restart the same call finds what exists
//! (the network is taken from the CNI cache, not added twice).

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Pod;
use outpost_core::pod;

use outpost_core::pod_worker::{SandboxProblem, SandboxReason};

use super::Pods;
use crate::apiserver::events::{self, EventType, pod_ref, reason};
use crate::error_chain::describe;
use crate::runtime::cgroups::CgroupName;
use crate::runtime::cni::{Attachment, PortMapping, Protocol};
use crate::runtime::handler::Handler;
use crate::runtime::netns::{PodNamespaces, Sharing, pid};
use crate::runtime::spec::claims::{self, Claimed};
use crate::runtime::spec::projection;
use crate::runtime::{container, spec, volumes};

/// What the pod's containers join.
#[derive(Debug, Clone)]
pub struct Sandbox {
    pub namespaces: PodNamespaces,
    /// The pod's pid namespace (`shareProcessNamespace`), held by its init.
    pub pid_namespace: Option<PathBuf>,
    /// What the containers get at `/dev/shm`: the pod's tmpfs, or the host's (`hostIPC`).
    pub dev_shm: PathBuf,
    pub ips: Vec<IpAddr>,
    pub pod_dir: PathBuf,
    /// The pod's cgroup (Q2): its containers' go under it.
    pub cgroup: CgroupName,
    /// K3: the host paths of its claim volumes, by volume name.
    pub claimed: BTreeMap<String, Claimed>,
    /// D5: the runtime handler its containers are made with, and its name (`None`: the
    /// default one).
    pub handler: Handler,
    pub handler_name: Option<String>,
}

/// The host's shm, which a `hostIPC` pod's containers get.
const HOST_DEV_SHM: &str = "/dev/shm";
/// The pod's shm tmpfs, in its run directory.
const DEV_SHM: &str = "shm";

/// The interface CNI wires in every pod.
const INTERFACE: &str = "eth0";

pub fn host_network(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false)
}

/// `shareProcessNamespace` (without `hostPID`, which the spec refuses alongside it).
fn shares_process_namespace(pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    spec.and_then(|s| s.share_process_namespace).unwrap_or(false)
        && !spec.and_then(|s| s.host_pid).unwrap_or(false)
}

/// Creates (or finds) the pod's namespaces, network and files; whether it made them
/// anew. The pod's run directory (on the tmpfs `/run`: gone after a reboot, removed at
/// tear-down) tells: it exists while the sandbox does.
///
/// A new sandbox's images are resolved meanwhile (`Prefetched`), for its containers'
/// starts.
pub async fn set_up(pods: &Pods, pod: &Pod) -> Result<(Sandbox, bool), SandboxProblem> {
    // D5: as kubelet, the handler is looked up before anything of the sandbox is made.
    let handler = super::handler::resolve(pods, pod).await?;
    let uid = pod::uid(pod).to_owned();
    let run_dir = pods.run_pods_dir().join(&uid);
    let fresh = blocking(move || {
        let fresh = !run_dir.exists();
        std::fs::create_dir_all(&run_dir).map(|()| fresh)
    })
    .await
    .map_err(|e| problem(SandboxReason::NamespacesFailed, describe(&e)))?;
    if !fresh {
        return make(pods, pod, uid, fresh, handler).await;
    }
    let prefetch = pods.prefetched.resolve(&pods.containerd, &uid, pod);
    let (made, ()) = tokio::join!(make(pods, pod, uid.clone(), fresh, handler), prefetch);
    if made.is_err() {
        pods.prefetched.forget(&uid);
    }
    made
}

/// The rest of [`set_up`], once its run directory is there.
async fn make(
    pods: &Pods,
    pod: &Pod,
    uid: String,
    fresh: bool,
    (handler_name, handler): (Option<String>, Handler),
) -> Result<(Sandbox, bool), SandboxProblem> {
    // The pod's cgroup with its limits, again for an adopted pod (the same limits).
    let (cgroups, owned) = (pods.settings.cgroups.clone(), pod.clone());
    let cgroup = blocking(move || cgroups.ensure_pod(&owned))
        .await
        .map_err(|e| problem(SandboxReason::PodCgroupFailed, describe(&e)))?;
    let spec = pod.spec.as_ref();
    let sharing = Sharing {
        host_network: host_network(pod),
        host_ipc: spec.and_then(|s| s.host_ipc).unwrap_or(false),
    };
    let ns_dir = namespaces_dir(pods, &uid);
    let namespaces = blocking(move || PodNamespaces::create(&ns_dir, sharing))
        .await
        .map_err(|e| problem(SandboxReason::NamespacesFailed, describe(&e)))?;
    let pid_namespace = if shares_process_namespace(pod) {
        let (dir, exe, host) =
            (namespaces_dir(pods, &uid), pods.settings.exe.clone(), pods.host.clone());
        let file = blocking(move || pid::ensure(host.as_ref(), &dir, &exe))
            .await
            .map_err(|e| problem(SandboxReason::NamespacesFailed, describe(&e)))?;
        Some(file)
    } else {
        None
    };
    let dev_shm = if sharing.host_ipc {
        PathBuf::from(HOST_DEV_SHM)
    } else {
        let (dir, owned, host) =
            (pods.run_pods_dir().join(&uid).join(DEV_SHM), pod.clone(), pods.host.clone());
        blocking(move || {
            volumes::dev_shm(host.as_ref(), &owned, &dir).map(|()| dir).map_err(Box::new)
        })
        .await
        .map_err(|e| problem(SandboxReason::VolumesNotReady, describe(&e)))?
    };
    let ips = network(pods, pod, &uid, namespaces.network.as_ref(), fresh).await?;
    let pod_dir = pods.pods_dir().join(&uid);
    let first_resolv_conf = !pod_dir.join(volumes::RESOLV_CONF).exists();
    let resolved = pods.settings.objects.resolve(pod, &projection::volume_references(pod)).await;
    let (dir, owned, pod_ips, dns) =
        (pod_dir.clone(), pod.clone(), ips.clone(), pods.settings.dns.clone());
    let (node_name, labels) = (pods.settings.node_name.clone(), pods.settings.node_labels.clone());
    let host = pods.host.clone();
    let (claimed, dns_events) = blocking(move || {
        let host = host.as_ref();
        let node = claims::Node { name: &node_name, labels: &labels };
        let claimed =
            volumes::set_up_claims(host, &dir, &owned, &resolved, node).map_err(Box::new)?;
        let events =
            volumes::prepare(host, &dir, &owned, &pod_ips, &dns, &resolved).map_err(Box::new)?;
        Ok::<_, Box<volumes::Error>>((claimed, events))
    })
    .await
    .map_err(|e| problem(SandboxReason::VolumesNotReady, describe(&e)))?;
    // K2: said once per pod (when its resolv.conf is first written), not at every set-up.
    if first_resolv_conf {
        let object = pod_ref(pod, None);
        for event in dns_events {
            tracing::warn!(pod.uid = %uid, reason = event.reason, "{}", event.message);
            if event.reason == spec::MISSING_CLUSTER_DNS {
                // kubelet tells the Node as well.
                let node = events::node_ref(&pods.settings.node_name);
                let message = spec::MISSING_CLUSTER_DNS_ON_NODE;
                pods.events.emit(&node, EventType::Warning, event.reason, message);
            }
            pods.events.emit(&object, EventType::Warning, event.reason, event.message);
        }
    }
    let sandbox = Sandbox {
        namespaces,
        pid_namespace,
        dev_shm,
        ips,
        pod_dir,
        cgroup,
        claimed,
        handler,
        handler_name,
    };
    Ok((sandbox, fresh))
}

/// The pod's IPs: the node's with the host's network, else its network namespace's
/// attachment (the cached one, unless the namespace was made anew).
async fn network(
    pods: &Pods,
    pod: &Pod,
    uid: &str,
    netns: Option<&PathBuf>,
    fresh: bool,
) -> Result<Vec<IpAddr>, SandboxProblem> {
    let uid = uid.to_owned();
    let ips = match netns {
        None => pods.settings.host_ip.into_iter().collect(),
        Some(netns) => {
            let cached = pods
                .cni
                .network(&uid)
                .map_err(|e| problem(SandboxReason::NetworkNotReady, describe(&e)))?;
            // A cached attachment of a sandbox made anew (after a reboot) is of a network
            // namespace that is gone: release it, and attach the new one.
            let cached = match cached {
                Some(_) if fresh => {
                    tracing::info!(pod.uid = %uid, "new network namespace: attaching the pod again");
                    pods.cni
                        .del(&uid)
                        .await
                        .map_err(|e| problem(SandboxReason::NetworkNotReady, describe(&e)))?;
                    None
                }
                cached => cached,
            };
            match cached {
                Some(network) => network.ips,
                None => {
                    let attachment = Attachment {
                        id: uid.clone(),
                        netns: netns.clone(),
                        interface: INTERFACE.to_owned(),
                        pod_namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                        pod_name: pod.metadata.name.clone().unwrap_or_default(),
                        pod_uid: uid.clone(),
                        ports: port_mappings(pod),
                    };
                    pods.limited(pods.cni.add(&attachment))
                        .await
                        .map_err(|e| problem(SandboxReason::NetworkNotReady, describe(&e)))?
                        .ips
                }
            }
        }
    };
    Ok(ips)
}

/// Writes the pod's API-object and downward API volumes again, from the objects as they
/// are now (V1); what cannot be written is logged and told as kubelet's FailedMount.
pub async fn refresh_volumes(pods: &Pods, pod: &Pod) {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default();
    if !volumes.iter().any(|v| projection::kind(v).is_some()) {
        return;
    }
    // A claim is read when the sandbox is set up, not at every refresh (K5: with `get`).
    let mut references = projection::volume_references(pod);
    references.retain(|r| !matches!(r, projection::Reference::PersistentVolumeClaim(_)));
    let resolved = pods.settings.objects.resolve(pod, &references).await;
    let (dir, owned, host) = (pods.pods_dir().join(pod::uid(pod)), pod.clone(), pods.host.clone());
    let errors = match tokio::task::spawn_blocking(move || {
        volumes::refresh(host.as_ref(), &dir, &owned, &resolved)
    })
    .await
    {
        Ok(Ok(())) => return,
        Ok(Err(errors)) => errors.iter().map(|e| describe(e)).collect(),
        Err(e) => vec![describe(&e)],
    };
    let object = pod_ref(pod, None);
    for message in errors {
        tracing::warn!(pod.uid = pod::uid(pod), error = message, "cannot update the pod's volumes");
        pods.events.emit(&object, EventType::Warning, reason::FAILED_MOUNT, message);
    }
}

/// Removes everything [`set_up`] made for the pod `uid` (its image volumes' snapshot
/// views too, V4), and the dead containers kept for it (G1: the pod takes them with
/// it); logs what it cannot remove.
pub async fn tear_down(pods: &Pods, uid: &str) {
    pods.prefetched.forget(uid);
    remove_dead_containers(pods, uid).await;
    if let Err(e) = pods.limited(pods.cni.del(uid)).await {
        tracing::warn!(pod.uid = uid, error = %describe(&e), "CNI DEL failed; the pod's address may stay allocated");
    }
    let (ns_dir, host) = (namespaces_dir(pods, uid), pods.host.clone());
    if let Err(e) = blocking(move || PodNamespaces::remove(host.as_ref(), &ns_dir)).await {
        tracing::warn!(pod.uid = uid, error = %describe(&e), "cannot remove the pod's namespaces");
    }
    let (run_dir, host) = (pods.run_pods_dir().join(uid), pods.host.clone());
    let cleanup = move || volumes::cleanup(host.as_ref(), &run_dir).map_err(Box::new);
    if let Err(e) = blocking(cleanup).await {
        tracing::warn!(pod.uid = uid, error = %describe(&e), "cannot remove the pod's run directory");
    }
    let (pod_dir, host) = (pods.pods_dir().join(uid), pods.host.clone());
    let cleanup = move || volumes::cleanup(host.as_ref(), &pod_dir).map_err(Box::new);
    if let Err(e) = blocking(cleanup).await {
        tracing::warn!(pod.uid = uid, error = %describe(&e), "cannot remove the pod's directory");
    }
    // V4: the image volumes' views, unmounted with the pod's directory.
    if let Err(e) = volumes::image::remove_views(&pods.containerd, uid).await {
        tracing::warn!(pod.uid = uid, error = %describe(&e), "cannot remove the pod's image volume snapshots");
    }
    let (cgroups, owned) = (pods.settings.cgroups.clone(), uid.to_owned());
    if let Err(e) = blocking(move || cgroups.remove_pod(&owned)).await {
        tracing::warn!(pod.uid = uid, error = %describe(&e), "cannot remove the pod's cgroup");
    }
}

/// The finished pod's emptyDir volumes go (memory-backed ones unmounted), so what an
/// evicted pod filled is given back; the rest of its sandbox stays until it is removed.
pub async fn release_volumes(pods: &Pods, uid: &str) {
    let (empty_dirs, host) =
        (pods.pods_dir().join(uid).join(volumes::EMPTY_DIR), pods.host.clone());
    match blocking(move || volumes::cleanup(host.as_ref(), &empty_dirs).map_err(Box::new)).await {
        Ok(()) => tracing::info!(pod.uid = uid, "the finished pod's emptyDir volumes are removed"),
        Err(e) => {
            tracing::warn!(
                pod.uid = uid,
                error = %describe(&e),
                "cannot remove the finished pod's emptyDir volumes"
            );
        }
    }
}

/// The pod's containers still in containerd once its worker removed its own: the dead
/// ones the garbage collector kept.
async fn remove_dead_containers(pods: &Pods, uid: &str) {
    let list = || container::list(&pods.containerd);
    let listed = match container::retry_while_unreachable("list containers", list).await {
        Ok(listed) => listed,
        Err(e) => {
            tracing::warn!(pod.uid = uid, error = %describe(&e), "cannot list the pod's dead containers to remove them");
            return;
        }
    };
    for dead in listed.iter().filter(|c| c.label(container::LABEL_POD_UID) == Some(uid)) {
        let remove = || container::remove(&pods.containerd, &dead.id);
        if let Err(e) = container::retry_while_unreachable("remove a container", remove).await {
            tracing::warn!(pod.uid = uid, container_id = dead.id, error = %describe(&e), "cannot remove a dead container of the pod");
        }
    }
}

/// Tears down sandboxes (namespaces, CNI attachments, pod dirs, cgroups) of pods not in `owned`:
/// what a start cut short by a crash left behind.
pub async fn remove_orphans(pods: &Pods, owned: &HashSet<String>) {
    let mut uids: HashSet<String> = HashSet::new();
    for dir in [&pods.run_pods_dir(), &pods.pods_dir()] {
        if let Ok(entries) = std::fs::read_dir(dir) {
            uids.extend(entries.flatten().filter_map(|e| e.file_name().into_string().ok()));
        }
    }
    uids.extend(pods.settings.cgroups.pod_uids());
    match pods.cni.attached() {
        Ok(ids) => uids.extend(ids),
        Err(e) => tracing::warn!(error = %describe(&e), "cannot list CNI attachments"),
    }
    for uid in uids.difference(owned) {
        tracing::info!(pod.uid = %uid, "removing the sandbox of a pod that is no longer desired");
        tear_down(pods, uid).await;
    }
}

fn namespaces_dir(pods: &Pods, uid: &str) -> PathBuf {
    pods.run_pods_dir().join(uid).join("ns")
}

/// The host ports of the pod's containers and sidecars (init containers that run to
/// completion serve nothing).
fn port_mappings(pod: &Pod) -> Vec<PortMapping> {
    let sidecars = pod.spec.iter().flat_map(|s| s.init_containers.iter().flatten());
    let sidecars = sidecars.filter(|c| pod::is_sidecar(c));
    let containers = pod.spec.iter().flat_map(|s| &s.containers).chain(sidecars);
    containers
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let host_port = u16::try_from(p.host_port?).ok().filter(|p| *p > 0)?;
            Some(PortMapping {
                host_port,
                container_port: u16::try_from(p.container_port).ok()?,
                protocol: match p.protocol.as_deref() {
                    Some("UDP") => Protocol::Udp,
                    Some("SCTP") => Protocol::Sctp,
                    _ => Protocol::Tcp,
                },
                host_ip: p.host_ip.as_deref().and_then(|ip| ip.parse().ok()),
            })
        })
        .collect()
}

pub(super) fn problem(reason: SandboxReason, message: String) -> SandboxProblem {
    SandboxProblem { reason, message }
}

/// Why [`blocking`] work failed: its own error `E`, or the end of its thread (a panic).
/// Either reads as its cause.
#[derive(Debug, thiserror::Error)]
enum Error<E: std::error::Error + 'static> {
    #[error(transparent)]
    Work(E),
    #[error(transparent)]
    Join(tokio::task::JoinError),
}

/// Runs blocking filesystem/namespace work off the async threads. The volumes' errors
/// come boxed: `outpost_runtime::volumes::Error` is 128 bytes, too large to return by
/// value (clippy's `result_large_err`).
async fn blocking<T, E>(work: impl FnOnce() -> Result<T, E> + Send + 'static) -> Result<T, Error<E>>
where
    T: Send + 'static,
    E: std::error::Error + Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(Error::Work(e)),
        Err(e) => Err(Error::Join(e)),
    }
}
