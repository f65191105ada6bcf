//! O5: the agent's stop. At SIGTERM with nothing to drain the agent exits at once: every
//! task's stop limit is what it waits for (a container's start under way, the managed
//! containerd's own stop), and none is spent waiting on a containerd that is not there.
//! The agent is measured as the issue found it: `--containerd external` pointing at a
//! socket nobody serves, and an API server that answers.

use std::ffi::OsString;
use std::time::Duration;

use outpost_tests::agent::Agent;
use outpost_tests::cluster::ApiNode;
use outpost_tests_needs::needs;

/// A hang, not a slow stop: before O5 this agent took 40 s (10 s for the pod workers,
/// 30 s for the containerd task, each waiting for containerd until its limit).
const PATIENCE: Duration = Duration::from_secs(20);

#[needs(pods)]
#[test]
fn o5_an_agent_whose_containerd_is_down_stops_at_sigterm_without_waiting_for_it() {
    let cluster = ApiNode::new();
    let missing = cluster.node.dir.path().join("no-containerd.sock");
    let mut args = cluster.node.args();
    let socket = args.iter().position(|a| a == "--containerd-socket").expect("a socket flag") + 1;
    args[socket] = missing.clone().into_os_string();
    args.extend([OsString::from("--kubeconfig"), cluster.node_kubeconfig.clone().into()]);
    let mut agent = Agent::start_pods(&cluster.node.manifests(), &args);
    agent.wait_for_log("containerd is not reachable; retrying with backoff");
    // The API side is up: the agent has something to talk to while containerd is gone.
    agent.wait_for_log("the Node is registered");

    let (status, took) = agent.terminate(PATIENCE);
    let log = agent.log();
    eprintln!("SIGTERM → exit: {took:?}");
    let status =
        status.unwrap_or_else(|| panic!("still running {PATIENCE:?} after SIGTERM:\n{log}"));
    assert!(status.success(), "exit {status}:\n{log}");
    assert!(
        !log.contains("did not finish its work in time"),
        "a task waited out its stop limit:\n{log}"
    );
    assert!(missing.metadata().is_err(), "nothing made the socket the test left missing");
}
