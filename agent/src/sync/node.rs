//! The Node object: registration on first contact and node status (issue 5, item 1).
//! PLACEHOLDER: written by the node helper.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use k8s_openapi::api::core::v1::Taint;

use super::Context;

/// What the Node is registered with and reports.
#[derive(Debug, Clone)]
pub struct Config {
    /// `--node-labels` (the well-known hostname/os/arch labels are added).
    pub labels: BTreeMap<String, String>,
    /// `--register-with-taints`.
    pub taints: Vec<Taint>,
    /// `--node-ip` or the default route's address (status.addresses InternalIP).
    pub node_ip: Option<IpAddr>,
    /// The state dir: DiskPressure and ephemeral-storage are read from its filesystem.
    pub state_dir: PathBuf,
    /// Whether containerd is connected (the Ready condition).
    pub runtime: crate::api::RuntimeReady,
    /// containerd's version once connected (`nodeInfo.containerRuntimeVersion`).
    pub runtime_version: Arc<OnceLock<String>>,
}

pub async fn run(context: Arc<Context>) {
    let _ = context;
    std::future::pending::<()>().await;
}
