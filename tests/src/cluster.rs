//! A test node whose agent reports to a test API server: what the sync tests (node,
//! mirror pods, pod status, events) share.
//!
//! The agent runs as the node (`system:node:edge-1`), under the server's Node authorizer
//! and NodeRestriction (SEMANTICS.md K5): when the server is dropped, a request of the
//! agent's that they refused and the test did not take
//! ([`TestApiServer::take_refusals`]) fails the test.

// A harness fails the test by panicking.
#![allow(clippy::expect_used)]

use std::ffi::OsString;
use std::path::PathBuf;

use tokio::runtime::Runtime;

use crate::agent::Agent;
use crate::apiserver::TestApiServer;
use crate::pods::Node;

#[derive(Debug)]
pub struct ApiNode {
    /// Runs the server (and whatever async a test needs).
    pub rt: Runtime,
    pub server: TestApiServer,
    pub node: Node,
    /// The server's kubeconfig, in the node's dir: the test's own (kubectl's).
    pub kubeconfig: PathBuf,
    /// The agent's kubeconfig: the node's identity.
    pub node_kubeconfig: PathBuf,
}

/// The node name the harness gives the agent (`--node-name Edge-1`, lowercased).
const NODE_NAME: &str = "edge-1";

impl ApiNode {
    /// A node and a plain-HTTP test API server (what [`Node::new`] needs, too).
    #[allow(clippy::new_without_default, reason = "it sets up real resources, not a default value")]
    pub fn new() -> ApiNode {
        ApiNode::with(Node::new())
    }

    /// [`ApiNode::new`], or what is missing (for the benchmarks, which report it).
    pub fn try_new() -> Result<ApiNode, String> {
        Node::try_new().map(ApiNode::with)
    }

    /// A node and a test API server started from `config` (a plain-HTTP one unless it
    /// says otherwise).
    pub fn with_server(config: crate::apiserver::Config) -> ApiNode {
        ApiNode::start_server(Node::new(), config)
    }

    /// [`ApiNode::with_server`], or what is missing (for the benchmarks, which report it).
    pub fn try_with_server(config: crate::apiserver::Config) -> Result<ApiNode, String> {
        Node::try_new().map(|node| ApiNode::start_server(node, config))
    }

    fn with(node: Node) -> ApiNode {
        ApiNode::start_server(node, TestApiServer::builder())
    }

    fn start_server(node: Node, config: crate::apiserver::Config) -> ApiNode {
        let rt = Runtime::new().expect("tokio runtime");
        let server = rt.block_on(config.start()).expect("test API server");
        let kubeconfig = server.kubeconfig(node.dir.path()).expect("kubeconfig");
        let node_kubeconfig =
            server.node_kubeconfig(node.dir.path(), NODE_NAME).expect("node kubeconfig");
        ApiNode { rt, server, node, kubeconfig, node_kubeconfig }
    }

    /// `outpost run` on the node, with `--kubeconfig` and `extra` flags.
    pub fn start(&self, extra: &[&str]) -> Agent {
        self.start_env(extra, &[])
    }

    /// [`ApiNode::start`] with `env` in the agent's environment.
    pub fn start_env(&self, extra: &[&str], env: &[(String, PathBuf)]) -> Agent {
        let mut args = self.node.args();
        let kubeconfig = self.node_kubeconfig.clone().into_os_string();
        args.extend([OsString::from("--kubeconfig"), kubeconfig]);
        args.extend(extra.iter().map(OsString::from));
        let mut command = std::process::Command::new(crate::outpost_bin());
        command.envs(env.iter().map(|(k, v)| (k, v)));
        Agent::start_pods_with(command, &self.node.manifests(), &args)
    }
}
