//! Running a network's plugin chain: ADD in order with each result passed on as
//! `prevResult`, DEL in reverse with the cached result, one plugin call at a time.

use std::net::IpAddr;
use std::path::Path;

use nix::sys::statfs::{NSFS_MAGIC, statfs};
use serde_json::Value;

use super::cache::Record;
use super::conf::{NetworkList, Plugin};
use super::protocol::{self, Call, Command, PluginError};
use super::{Cni, Error, PLUGIN_TIMEOUT, Result, exec};

impl Cni {
    /// Runs the list's ADDs in order. On failure, also says how many plugins may have
    /// set something up (those that ran, the failed one included) for the cleanup DEL.
    pub(super) async fn add_list(
        &self,
        list: &NetworkList,
        record: &Record,
        pod: &str,
    ) -> Result<(Value, Vec<IpAddr>), (usize, Error)> {
        let call = Call {
            command: Command::Add,
            container_id: &record.id,
            netns: &record.netns,
            ifname: &record.interface,
            args: &record.cni_args,
            bin_dirs: &self.config.bin_dirs,
        };
        let origin = list.file.display().to_string();
        let mut result = Value::Null;
        for (index, plugin) in list.plugins.iter().enumerate() {
            let prev = Some(&result).filter(|prev| !prev.is_null());
            let stdin = protocol::stdin(list, plugin, prev, &record.capability_args);
            result = match self.invoke(&call, plugin, &stdin, pod, &origin).await {
                Ok(Value::Null) => {
                    let error = Error::PluginFailed {
                        plugin: plugin.kind.clone(),
                        origin,
                        command: Command::Add,
                        pod: pod.to_owned(),
                        message: "it printed no result".to_owned(),
                    };
                    return Err((index + 1, error));
                }
                Ok(output) => output,
                Err(error @ Error::PluginMissing { .. }) => return Err((index, error)),
                Err(error) => return Err((index + 1, error)),
            };
        }
        let ran = list.plugins.len();
        let last = list.plugins.last().map(|plugin| plugin.kind.clone()).unwrap_or_default();
        let ips = protocol::pod_ips(&result, &record.interface).map_err(|source| {
            let error = Error::PluginResult {
                plugin: last,
                origin: origin.clone(),
                command: Command::Add,
                pod: pod.to_owned(),
                source,
            };
            (ran, error)
        })?;
        if ips.is_empty() {
            let error = Error::NoIp {
                pod: pod.to_owned(),
                interface: record.interface.clone(),
                file: list.file.clone(),
            };
            return Err((ran, error));
        }
        Ok((result, ips))
    }

    /// Runs the DELs of the list's first `ran` plugins, in reverse order.
    pub(super) async fn del_list(
        &self,
        list: &NetworkList,
        ran: usize,
        record: &Record,
        pod: &str,
    ) -> Result<()> {
        let netns =
            if is_namespace(&record.netns) { record.netns.as_path() } else { Path::new("") };
        let call = Call {
            command: Command::Del,
            container_id: &record.id,
            netns,
            ifname: &record.interface,
            args: &record.cni_args,
            bin_dirs: &self.config.bin_dirs,
        };
        let prev = record.result.as_ref().filter(|_| list.del_takes_prev_result());
        let origin = list.file.display().to_string();
        for plugin in list.plugins[..ran].iter().rev() {
            let stdin = protocol::stdin(list, plugin, prev, &record.capability_args);
            self.invoke(&call, plugin, &stdin, pod, &origin).await?;
        }
        Ok(())
    }

    /// Runs one plugin; returns its result document (`Null` when it printed nothing,
    /// as DEL may).
    pub(super) async fn invoke(
        &self,
        call: &Call<'_>,
        plugin: &Plugin,
        stdin: &Value,
        pod: &str,
        origin: &str,
    ) -> Result<Value> {
        let binary = exec::find(&self.config.bin_dirs, &plugin.kind).ok_or_else(|| {
            Error::PluginMissing {
                plugin: plugin.kind.clone(),
                origin: origin.to_owned(),
                dirs: std::env::join_paths(&self.config.bin_dirs)
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            }
        })?;
        let stdin = serde_json::to_vec(stdin).unwrap_or_default();
        tracing::debug!(plugin = plugin.kind, command = %call.command, "running CNI plugin for {pod}");
        let output =
            exec::run(&binary, call.env(), stdin, PLUGIN_TIMEOUT).await.map_err(|source| {
                Error::PluginRun {
                    plugin: plugin.kind.clone(),
                    origin: origin.to_owned(),
                    command: call.command,
                    pod: pod.to_owned(),
                    source,
                }
            })?;
        let failed = |message: String| Error::PluginFailed {
            plugin: plugin.kind.clone(),
            origin: origin.to_owned(),
            command: call.command,
            pod: pod.to_owned(),
            message,
        };
        if !output.status.success() {
            return Err(failed(match PluginError::parse(&output.stdout) {
                Some(error) => error.to_string(),
                None => {
                    let stderr = String::from_utf8_lossy(&output.stderr);
                    format!("{} ({})", stderr.trim(), output.status)
                }
            }));
        }
        if output.stdout.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&output.stdout).map_err(|source| Error::PluginResult {
            plugin: plugin.kind.clone(),
            origin: origin.to_owned(),
            command: call.command,
            pod: pod.to_owned(),
            source: protocol::Error::Result(source),
        })
    }
}

/// Whether `path` is a mounted namespace (a gone one is passed to DEL as empty, as
/// containerd does, so plugins skip the netns and still free their allocations).
fn is_namespace(path: &Path) -> bool {
    statfs(path).is_ok_and(|stat| stat.filesystem_type() == NSFS_MAGIC)
}
