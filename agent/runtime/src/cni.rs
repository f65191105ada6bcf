//! A CNI client: wires a pod's network namespace with the standard plugin binaries, as
//! libcni and containerd's CRI do (spec 1.0.0; 0.3.x and 0.4.0 configs work too).
//!
//! The network is the first config file of the conf dir (see [`conf`]). ADD runs the
//! list's plugins in order, each getting the previous one's result (`lo` is up already:
//! the pod's network namespace is made with it up, [`crate::netns`]); DEL runs them in reverse with what ADD used, which the
//! [`cache`] keeps, so a changed config or a restarted agent still tears down exactly
//! what was set up.

pub mod cache;
mod chain;
pub mod exec;

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use self::cache::{Cache, Record};
use self::conf::{DefaultNetwork, NetworkList};
use self::protocol::Command;

/// The network configs and the plugin protocol, without IO (the crate `outpost-formats`).
pub use outpost_formats::cni::{PortMapping, Protocol, conf, protocol};

/// How long one plugin call may take before it is killed.
const PLUGIN_TIMEOUT: Duration = Duration::from_secs(90);

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "no CNI network config (*.conflist, *.conf or *.json) in {}: write one there \
         (Outpost writes its default at startup when the directory is empty)",
        dir.display()
    )]
    NoConfig { dir: PathBuf },
    #[error("reading the CNI conf dir {}", dir.display())]
    ReadConfDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the CNI config {}", file.display())]
    ReadConf {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("loading the CNI network config")]
    Conf(#[source] conf::Error),
    #[error("writing Outpost's default CNI config {}", file.display())]
    WriteDefault {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("attaching pod {pod} to the CNI network")]
    Attachment {
        pod: String,
        #[source]
        source: protocol::Error,
    },
    #[error(
        "CNI plugin {plugin} (from {origin}) is in none of the CNI bin dirs {dirs}: install \
         it (Debian: containernetworking-plugins) or add its directory to the bin dirs"
    )]
    PluginMissing { plugin: String, origin: String, dirs: String },
    #[error("running CNI plugin {plugin} (from {origin}) for {command} of pod {pod}")]
    PluginRun {
        plugin: String,
        origin: String,
        command: Command,
        pod: String,
        #[source]
        source: exec::Error,
    },
    #[error("CNI plugin {plugin} (from {origin}) failed {command} for pod {pod}: {message}")]
    PluginFailed { plugin: String, origin: String, command: Command, pod: String, message: String },
    #[error(
        "CNI plugin {plugin} (from {origin}) returned an unusable {command} result for pod {pod}"
    )]
    PluginResult {
        plugin: String,
        origin: String,
        command: Command,
        pod: String,
        #[source]
        source: protocol::Error,
    },
    #[error(
        "the CNI network of {} gave pod {pod} no IP address on {interface}: \
         does its IPAM section allocate one?",
        file.display()
    )]
    NoIp { pod: String, interface: String, file: PathBuf },
    #[error("reading the cached CNI result of attachment {id}: delete and re-add it")]
    CachedResult {
        id: String,
        #[source]
        source: protocol::Error,
    },
    #[error("the CNI attachment cache")]
    Cache(#[source] cache::Error),
}

impl From<cache::Error> for Error {
    fn from(source: cache::Error) -> Error {
        Error::Cache(source)
    }
}

/// Where the CNI client finds configs and plugins and keeps its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniConfig {
    /// Network configs, e.g. `/etc/cni/net.d`.
    pub conf_dir: PathBuf,
    /// Plugin binaries, searched in order, e.g. `/opt/cni/bin`, `/usr/lib/cni`.
    pub bin_dirs: Vec<PathBuf>,
    /// Attachment cache and the default network's IPAM data, e.g. `<state>/cni`.
    pub cache_dir: PathBuf,
}

/// A pod to attach: its network namespace and what the plugins are told about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// The CNI container id: the pod UID.
    pub id: String,
    pub netns: PathBuf,
    /// The interface in the pod, `eth0`.
    pub interface: String,
    pub pod_namespace: String,
    pub pod_name: String,
    pub pod_uid: String,
    pub ports: Vec<PortMapping>,
}

/// What the network gave a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodNetwork {
    /// IPv4 first; `ips[0]` is the pod IP.
    pub ips: Vec<IpAddr>,
}

/// The CNI client.
#[derive(Debug, Clone)]
pub struct Cni {
    config: CniConfig,
    cache: Cache,
}

impl Cni {
    pub fn new(config: CniConfig) -> Cni {
        let cache = Cache::new(&config.cache_dir);
        Cni { config, cache }
    }

    /// Writes Outpost's default network config if the conf dir holds none, returning
    /// its path; `None` when a config is already there (it is kept as it is).
    pub fn ensure_default_config(&self) -> Result<Option<PathBuf>> {
        if self.conf_file()?.is_some() {
            return Ok(None);
        }
        let file = self.config.conf_dir.join(conf::DEFAULT_FILE);
        let document = DefaultNetwork::new(&self.config.cache_dir).conflist();
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(&self.config.conf_dir)?;
            let tmp = self.config.conf_dir.join(format!(".{}.tmp", conf::DEFAULT_FILE));
            std::fs::write(&tmp, serde_json::to_vec_pretty(&document)?)?;
            std::fs::rename(&tmp, &file)
        };
        write().map_err(|source| Error::WriteDefault { file: file.clone(), source })?;
        tracing::info!(file = %file.display(), "wrote the default CNI network config");
        Ok(Some(file))
    }

    /// Attaches a pod: the network's plugins in order. An earlier
    /// attachment of the same id is deleted first. If a plugin fails, the plugins that
    /// ran (the failed one included) get a DEL before the error is returned.
    pub async fn add(&self, attachment: &Attachment) -> Result<PodNetwork> {
        let pod = format!("{}/{}", attachment.pod_namespace, attachment.pod_name);
        let invalid = |source| Error::Attachment { pod: pod.clone(), source };
        protocol::check_container_id(&attachment.id).map_err(invalid)?;
        let args = protocol::cni_args(
            &attachment.pod_namespace,
            &attachment.pod_name,
            &attachment.pod_uid,
            &attachment.id,
        )
        .map_err(invalid)?;
        if self.cache.read(&attachment.id)?.is_some() {
            tracing::info!(
                pod.namespace = attachment.pod_namespace,
                pod.name = attachment.pod_name,
                pod.uid = attachment.pod_uid,
                id = attachment.id,
                "deleting the pod's previous CNI attachment"
            );
            // One that cannot be deleted (its config named a plugin that is not installed,
            // say) must not keep the pod off the network for good.
            if let Err(e) = self.del(&attachment.id).await {
                tracing::warn!(
                    pod.namespace = attachment.pod_namespace,
                    pod.name = attachment.pod_name,
                    pod.uid = attachment.pod_uid,
                    id = attachment.id,
                    error = %outpost_core::error_chain::describe(&e),
                    "cannot delete the pod's previous CNI attachment; forgetting it"
                );
                self.cache.remove(&attachment.id)?;
            }
        }
        let list = self.load()?;
        let mut record = Record {
            id: attachment.id.clone(),
            conf_file: list.file.clone(),
            config: list.to_conflist(),
            netns: attachment.netns.clone(),
            interface: attachment.interface.clone(),
            pod_namespace: attachment.pod_namespace.clone(),
            pod_name: attachment.pod_name.clone(),
            cni_args: args,
            capability_args: protocol::capability_args(&attachment.ports),
            result: None,
        };
        // Recorded before the plugins run, so an agent dying halfway leaves a record
        // (`attached`) whose DEL frees what was allocated.
        self.cache.write(&record)?;
        match self.add_list(&list, &record, &pod).await {
            Ok((result, ips)) => {
                record.result = Some(result);
                self.cache.write(&record)?;
                // Durable a moment later, off the pod's start (see `Cache::write`).
                let (cache, id) = (self.cache.clone(), record.id.clone());
                tokio::task::spawn_blocking(move || {
                    if let Err(e) = cache.persist(&id) {
                        tracing::warn!(id, error = %outpost_core::error_chain::describe(&e), "cannot make the CNI cache record durable");
                    }
                });
                tracing::info!(pod.namespace = attachment.pod_namespace, pod.name = attachment.pod_name, pod.uid = attachment.pod_uid, id = attachment.id, ip = %ips[0], "attached pod to CNI network");
                Ok(PodNetwork { ips })
            }
            Err((ran, error)) => {
                match self.del_list(&list, ran, &record, &pod).await {
                    Ok(()) => self.cache.remove(&record.id)?,
                    Err(del_error) => tracing::warn!(
                        pod.namespace = attachment.pod_namespace,
                        pod.name = attachment.pod_name,
                        pod.uid = attachment.pod_uid,
                        error = %outpost_core::error_chain::describe(&del_error),
                        "cleaning up after a failed CNI ADD; the cached attachment is kept for a later DEL"
                    ),
                }
                Err(error)
            }
        }
    }

    /// Detaches pod `id` with what its ADD used. No attachment: `Ok`. If its netns is
    /// gone, the plugins still run (with an empty `CNI_NETNS`) so IPAM frees the address.
    pub async fn del(&self, id: &str) -> Result<()> {
        protocol::check_container_id(id)
            .map_err(|source| Error::Attachment { pod: id.to_owned(), source })?;
        let Some(record) = self.cache.read(id)? else {
            return Ok(());
        };
        let pod = format!("{}/{}", record.pod_namespace, record.pod_name);
        let bytes = serde_json::to_vec(&record.config).unwrap_or_default();
        // Parsed as a .conflist, whatever the original file was.
        let list = NetworkList::parse(&record.conf_file.with_extension("conflist"), &bytes)
            .map_err(Error::Conf)?;
        let list = NetworkList { file: record.conf_file.clone(), ..list };
        self.del_list(&list, list.plugins.len(), &record, &pod).await?;
        self.cache.remove(id)?;
        tracing::info!(
            pod.namespace = record.pod_namespace,
            pod.name = record.pod_name,
            id,
            "detached pod from CNI network"
        );
        Ok(())
    }

    /// The ids with a cached attachment, sorted (to clean up leaks after a restart).
    pub fn attached(&self) -> Result<Vec<String>> {
        Ok(self.cache.ids()?)
    }

    /// What a completed ADD of `id` gave, from the cache (to adopt a running pod).
    pub fn network(&self, id: &str) -> Result<Option<PodNetwork>> {
        let Some(record) = self.cache.read(id)? else { return Ok(None) };
        let Some(result) = &record.result else { return Ok(None) };
        let ips = protocol::pod_ips(result, &record.interface)
            .map_err(|source| Error::CachedResult { id: id.to_owned(), source })?;
        Ok(Some(PodNetwork { ips }))
    }

    fn conf_file(&self) -> Result<Option<PathBuf>> {
        let dir = &self.config.conf_dir;
        let read_dir = |source| Error::ReadConfDir { dir: dir.clone(), source };
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(read_dir(e)),
        };
        let mut names = Vec::new();
        for entry in entries {
            let path = entry.map_err(read_dir)?.path();
            if path.is_file() {
                names.extend(path.file_name().and_then(|n| n.to_str()).map(str::to_owned));
            }
        }
        Ok(conf::pick(names.iter().map(String::as_str)).map(|name| dir.join(name)))
    }

    fn load(&self) -> Result<NetworkList> {
        let file = self
            .conf_file()?
            .ok_or_else(|| Error::NoConfig { dir: self.config.conf_dir.clone() })?;
        let bytes = std::fs::read(&file)
            .map_err(|source| Error::ReadConf { file: file.clone(), source })?;
        NetworkList::parse(&file, &bytes).map_err(Error::Conf)
    }
}

#[cfg(test)]
mod tests;
