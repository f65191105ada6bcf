//! Graceful node shutdown (J3) as kubelet's node shutdown manager does it on Linux:
//! systemd-logind, over D-Bus on the system bus (`DBUS_SYSTEM_BUS_ADDRESS` when set),
//! delays the machine's shutdown while the agent holds a `delay` inhibitor lock on
//! `shutdown`; its `PrepareForShutdown(true)` says the shutdown has begun. The agent then
//! stops the pods by priority group ([`outpost_core::node_shutdown`]), reports them and
//! the node, and releases the lock (closes its descriptor): the shutdown goes on.
//! `PrepareForShutdown(false)`, a shutdown called off, takes the lock again.
//!
//! A SIGTERM without `PrepareForShutdown` (an agent restart) is not a shutdown: the pods
//! keep running. Without logind (no system bus, no `org.freedesktop.login1`) the agent
//! says so and runs without graceful node shutdown, as kubelet does.

use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{mpsc, oneshot};
use tracing::{info, warn};
use zbus::zvariant::OwnedFd;

use crate::error_chain::describe;

/// Who takes the lock, as `systemd-inhibit --list` shows it.
pub const WHO: &str = "outpost";
/// Why, as `systemd-inhibit --list` shows it.
pub const WHY: &str = "Outpost is stopping its pods by priority (graceful node shutdown)";

/// systemd-logind's manager object, the parts a graceful node shutdown uses.
#[zbus::proxy(
    interface = "org.freedesktop.login1.Manager",
    default_service = "org.freedesktop.login1",
    default_path = "/org/freedesktop/login1",
    gen_blocking = false
)]
trait LoginManager {
    /// Takes an inhibitor lock: held as long as the returned descriptor is open.
    fn inhibit(&self, what: &str, who: &str, why: &str, mode: &str) -> zbus::Result<OwnedFd>;

    /// `true`: the machine is about to shut down; `false`: the shutdown was called off.
    #[zbus(signal)]
    fn prepare_for_shutdown(&self, start: bool) -> zbus::Result<()>;

    /// The longest logind waits for delay locks.
    #[zbus(property, name = "InhibitDelayMaxUSec")]
    fn inhibit_delay_max_usec(&self) -> zbus::Result<u64>;
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot connect to the system D-Bus (DBUS_SYSTEM_BUS_ADDRESS or \
         /run/dbus/system_bus_socket); graceful node shutdown needs systemd-logind"
    )]
    Connect(#[source] zbus::Error),
    #[error("cannot reach systemd-logind (org.freedesktop.login1) on the system bus")]
    Proxy(#[source] zbus::Error),
    #[error("cannot subscribe to logind's PrepareForShutdown signal")]
    Subscribe(#[source] zbus::Error),
    #[error("cannot read logind's InhibitDelayMaxUSec")]
    DelayMax(#[source] zbus::Error),
    #[error("logind refused a delay inhibitor lock on shutdown")]
    Inhibit(#[source] zbus::Error),
}

/// A shutdown that has begun: stop the pods, then [`Shutdown::release`] the lock. Dropped
/// without a release, the lock is released too.
#[derive(Debug)]
pub struct Shutdown {
    release: oneshot::Sender<()>,
}

impl Shutdown {
    /// The pods are stopped and reported: the machine's shutdown may go on.
    pub fn release(self) {
        let _ = self.release.send(());
    }
}

/// The shutdowns as they begin.
pub type Shutdowns = mpsc::Receiver<Shutdown>;

/// The `node_shutdown` task and where it tells of a shutdown. `total` is the whole
/// shutdown's time (every priority group's grace period).
pub fn build(total: Duration) -> (impl Future<Output = ()> + Send + 'static, Shutdowns) {
    let (tx, rx) = mpsc::channel(1);
    let task = async move {
        if let Err(e) = run(total, tx).await {
            warn!(error = %describe(&e), "graceful node shutdown is off");
        }
    };
    (task, rx)
}

async fn run(total: Duration, shutdowns: mpsc::Sender<Shutdown>) -> Result<(), Error> {
    let bus = zbus::Connection::system().await.map_err(Error::Connect)?;
    let logind = LoginManagerProxy::new(&bus).await.map_err(Error::Proxy)?;
    check_delay_max(&logind, total).await?;
    // Subscribed before the lock is taken: no shutdown falls in between.
    let mut signals = logind.receive_prepare_for_shutdown().await.map_err(Error::Subscribe)?;
    let mut lock = Some(inhibit(&logind).await?);
    info!(?total, "holding logind's delay inhibitor lock on shutdown");
    while let Some(signal) = signals.next().await {
        let start = match signal.args() {
            Ok(args) => args.start,
            Err(e) => {
                warn!(error = %describe(&e), "PrepareForShutdown without its argument; ignored");
                continue;
            }
        };
        match (start, lock.is_some()) {
            (true, true) => {
                info!("logind: the machine shuts down; stopping the pods by priority (J3)");
                let (release, released) = oneshot::channel();
                if shutdowns.send(Shutdown { release }).await.is_ok() {
                    let _ = released.await;
                }
                lock = None;
                info!("released logind's inhibitor lock: the shutdown goes on");
            }
            (false, false) => {
                info!("logind: the shutdown was called off; taking the inhibitor lock again");
                lock = Some(inhibit(&logind).await?);
            }
            (true, false) => info!("logind: PrepareForShutdown again; the pods are stopped"),
            (false, true) => {}
        }
    }
    warn!("the system bus closed: graceful node shutdown is off from now on");
    Ok(())
}

async fn inhibit(logind: &LoginManagerProxy<'_>) -> Result<OwnedFd, Error> {
    logind.inhibit("shutdown", WHO, WHY, "delay").await.map_err(Error::Inhibit)
}

/// logind delays a shutdown at most `InhibitDelayMaxUSec` (5 s by default), whatever the
/// locks: a shorter delay than the shutdown needs cuts the last groups short. kubelet
/// rewrites logind's config; the agent says what to write.
async fn check_delay_max(logind: &LoginManagerProxy<'_>, total: Duration) -> Result<(), Error> {
    let max =
        Duration::from_micros(logind.inhibit_delay_max_usec().await.map_err(Error::DelayMax)?);
    if max < total {
        warn!(
            inhibit_delay_max = ?max,
            shutdown_grace_period = ?total,
            "logind delays a shutdown less than the pods' shutdown grace periods need; set \
             InhibitDelayMaxSec={} in /etc/systemd/logind.conf.d/99-outpost.conf and reload \
             logind (systemctl kill -s HUP systemd-logind)",
            total.as_secs_f64().ceil()
        );
    } else {
        info!(inhibit_delay_max = ?max, "logind's InhibitDelayMaxUSec covers the shutdown grace periods");
    }
    Ok(())
}
