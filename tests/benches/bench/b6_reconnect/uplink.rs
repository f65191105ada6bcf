//! B6's network: two network namespaces of the benchmark's own, one for the agent's side
//! and one for the test API server, joined by a veth pair (198.18.0.1/30 ↔
//! 198.18.0.2/30, the benchmarking range). The agent's end going down and up is an
//! outage its kernel sees, as a box's uplink going away and coming back. Neither
//! namespace has any other route, so nothing the agent sends can leave the machine.
//! Both namespaces, and the pair with them, are removed when the [`Uplink`] is dropped,
//! on failure too.

use std::fs::File;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use anyhow::{Context, ensure};
use nix::sched::{CloneFlags, setns};

/// The agent's address.
pub const AGENT_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The API server's address.
pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The agent's end of the pair: the link cut and restored.
const AGENT_LINK: &str = "uplink0";
const SERVER_LINK: &str = "uplink1";

#[derive(Debug)]
pub struct Uplink {
    agent: String,
    server: String,
}

impl Uplink {
    /// Makes the namespaces and the link between them, up.
    pub fn create() -> anyhow::Result<Uplink> {
        let id = std::process::id();
        // Made before anything exists, so that a failure half-way removes what was made.
        let uplink = Uplink { agent: format!("opb6-{id}-agent"), server: format!("opb6-{id}-api") };
        ip(&["netns", "add", &uplink.agent])?;
        ip(&["netns", "add", &uplink.server])?;
        let (agent, server) = (uplink.agent.as_str(), uplink.server.as_str());
        let peer = ["peer", "name", SERVER_LINK, "netns", server];
        ip(&[&["-n", agent, "link", "add", AGENT_LINK, "type", "veth"], &peer[..]].concat())?;
        ip(&["-n", agent, "address", "add", &format!("{AGENT_IP}/30"), "dev", AGENT_LINK])?;
        ip(&["-n", server, "address", "add", &format!("{SERVER_IP}/30"), "dev", SERVER_LINK])?;
        for (netns, link) in [(agent, "lo"), (server, "lo"), (server, SERVER_LINK)] {
            ip(&["-n", netns, "link", "set", link, "up"])?;
        }
        uplink.up()?;
        Ok(uplink)
    }

    /// The server's namespace (`/run/netns/NAME`).
    pub fn server_netns(&self) -> PathBuf {
        netns_path(&self.server)
    }

    /// The agent's namespace, open: what its threads enter.
    pub fn agent_netns(&self) -> anyhow::Result<Arc<File>> {
        let path = netns_path(&self.agent);
        Ok(Arc::new(File::open(&path).with_context(|| format!("open {}", path.display()))?))
    }

    /// Takes the agent's end down: its kernel drops the route to the server.
    pub fn down(&self) -> anyhow::Result<()> {
        ip(&["-n", &self.agent, "link", "set", AGENT_LINK, "down"])
    }

    /// Brings the agent's end back up.
    pub fn up(&self) -> anyhow::Result<()> {
        ip(&["-n", &self.agent, "link", "set", AGENT_LINK, "up"])
    }
}

impl Drop for Uplink {
    fn drop(&mut self) {
        for netns in [&self.agent, &self.server] {
            if let Err(error) = ip(&["netns", "delete", netns]) {
                eprintln!("B6: cannot remove the network namespace {netns}: {error:#}");
            }
        }
    }
}

/// Enters `netns` on the calling thread (its sockets are made there from now on).
pub fn enter(netns: &File) -> anyhow::Result<()> {
    setns(netns, CloneFlags::CLONE_NEWNET).context("cannot enter B6's agent network namespace")
}

fn netns_path(name: &str) -> PathBuf {
    PathBuf::from("/run/netns").join(name)
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let output = Command::new("ip").args(args).output().context("cannot run ip")?;
    ensure!(
        output.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(())
}
