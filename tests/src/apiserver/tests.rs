//! Tests of the test API server, with kube-rs (the agent's client) as the client, so
//! they prove compatibility as well as behaviour.

mod admission;
mod bootstrap;
mod certificates;
mod claims;
mod crud;
mod data;
mod ephemeral;
mod fault;
mod flow;
mod net;
mod parts;
mod resize;
mod reviews;
mod services;
mod token;
mod watch;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use serde_json::json;

use super::TestApiServer;

/// How long a test waits for something that should happen at once.
const PATIENCE: Duration = Duration::from_secs(10);

/// A kube-rs client made from the server's kubeconfig (so the kubeconfig is tested too).
async fn client(server: &TestApiServer) -> Client {
    let dir = tempfile::tempdir().unwrap();
    let path = server.kubeconfig(dir.path()).unwrap();
    let kubeconfig = Kubeconfig::read_from(&path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

async fn pods(server: &TestApiServer) -> Api<Pod> {
    Api::namespaced(client(server).await, "default")
}

/// A one-container pod in `default`, labelled `app=<name>`, bound to `node` if given.
fn pod(name: &str, node: Option<&str>) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": "default", "labels": { "app": name } },
        "spec": { "nodeName": node, "containers": [{ "name": "main", "image": "busybox" }] },
    }))
    .unwrap()
}

/// The HTTP code and reason of a kube-rs API error.
fn api_error<T: std::fmt::Debug>(result: kube::Result<T>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Drives a kube-rs `watcher()` stream in a task (so its watch stays open while the
/// test does other things) and hands on each event, described, or `error`.
fn drive<S>(events: S) -> tokio::sync::mpsc::UnboundedReceiver<String>
where
    S: futures::Stream<
            Item = Result<kube::runtime::watcher::Event<Pod>, kube::runtime::watcher::Error>,
        > + Send
        + 'static,
{
    use futures::StreamExt as _;
    use kube::runtime::watcher::Event;
    let name = |p: Pod| p.metadata.name.unwrap_or_default();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            let described = match event {
                Ok(Event::Apply(p)) => format!("apply {}", name(p)),
                Ok(Event::Delete(p)) => format!("delete {}", name(p)),
                Ok(Event::Init) => "init".into(),
                Ok(Event::InitApply(p)) => format!("init-apply {}", name(p)),
                Ok(Event::InitDone) => "init-done".into(),
                Err(_) => "error".into(),
            };
            if tx.send(described).is_err() {
                return;
            }
        }
    });
    rx
}

/// Runs `future` with [`PATIENCE`]; a hang fails the test instead of stalling it.
async fn soon<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(PATIENCE, future).await.expect("timed out")
}
