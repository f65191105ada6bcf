//! A stand-in systemd-logind for the graceful node shutdown tests (J3): systemd is not
//! PID 1 on the test machines, so the real logind cannot run. A real `dbus-daemon` runs
//! a private system-like bus ([`Bus`]); [`LoginManager`] serves
//! `org.freedesktop.login1.Manager` on it with zbus, as logind does the parts the agent
//! uses: `Inhibit` hands out a real descriptor (a pipe's write end, whose close the
//! stand-in sees as the lock's release), the `InhibitDelayMaxUSec` property, and the
//! `PrepareForShutdown` signal, emitted when the test says.

// A harness fails the test by panicking.
#![allow(clippy::expect_used)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;
use zbus::object_server::SignalEmitter;

const PATH: &str = "/org/freedesktop/login1";
const NAME: &str = "org.freedesktop.login1";

/// A `dbus-daemon` on a socket in a private directory; killed on drop.
#[derive(Debug)]
pub struct Bus {
    child: Child,
    _dir: tempfile::TempDir,
    /// The bus's address, for `DBUS_SYSTEM_BUS_ADDRESS`.
    pub address: String,
}

impl Bus {
    pub fn start() -> Bus {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("bus.conf");
        let socket = dir.path().join("bus.sock");
        std::fs::write(
            &config,
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"#,
                socket.display()
            ),
        )
        .expect("write the bus config");
        let mut child = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--nopidfile", "--print-address"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start dbus-daemon (the dbus package)");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).expect("dbus-daemon's address");
        let address = line.trim().to_owned();
        assert!(address.starts_with("unix:"), "dbus-daemon printed {line:?}");
        Bus { child, _dir: dir, address }
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One inhibitor lock handed out.
#[derive(Debug, Clone)]
pub struct Lock {
    pub what: String,
    pub who: String,
    pub why: String,
    pub mode: String,
    pub taken: Instant,
    /// When its descriptor was closed everywhere (the holder released it).
    pub released: Option<Instant>,
}

type Locks = Arc<Mutex<Vec<Lock>>>;

struct Manager {
    delay_max: Duration,
    locks: Locks,
}

#[zbus::interface(name = "org.freedesktop.login1.Manager")]
impl Manager {
    /// A lock is a pipe: the holder gets the write end; the read end sees EOF once every
    /// copy of it is closed.
    async fn inhibit(
        &self,
        what: String,
        who: String,
        why: String,
        mode: String,
    ) -> zbus::fdo::Result<zbus::zvariant::OwnedFd> {
        let (read, write) =
            nix::unistd::pipe().map_err(|e| zbus::fdo::Error::Failed(e.to_string()))?;
        let index = {
            let mut locks = self.locks.lock().expect("locks");
            locks.push(Lock { what, who, why, mode, taken: Instant::now(), released: None });
            locks.len() - 1
        };
        let locks = self.locks.clone();
        std::thread::spawn(move || {
            let mut read = std::fs::File::from(read);
            let mut buf = [0u8; 16];
            while matches!(read.read(&mut buf), Ok(n) if n > 0) {}
            locks.lock().expect("locks")[index].released = Some(Instant::now());
        });
        Ok(zbus::zvariant::OwnedFd::from(write))
    }

    #[zbus(property, name = "InhibitDelayMaxUSec")]
    fn inhibit_delay_max_usec(&self) -> u64 {
        u64::try_from(self.delay_max.as_micros()).unwrap_or(u64::MAX)
    }

    #[zbus(signal)]
    async fn prepare_for_shutdown(emitter: &SignalEmitter<'_>, start: bool) -> zbus::Result<()>;
}

/// The stand-in logind, serving on a [`Bus`] until dropped.
pub struct LoginManager {
    rt: Runtime,
    connection: zbus::Connection,
    locks: Locks,
}

impl std::fmt::Debug for LoginManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginManager").field("locks", &self.locks).finish_non_exhaustive()
    }
}

impl LoginManager {
    /// Serves `org.freedesktop.login1` on `bus`, with `InhibitDelayMaxUSec` = `delay_max`.
    pub fn start(bus: &Bus, delay_max: Duration) -> LoginManager {
        let rt = Runtime::new().expect("tokio runtime");
        let locks = Locks::default();
        let manager = Manager { delay_max, locks: locks.clone() };
        let connection = rt
            .block_on(async {
                zbus::connection::Builder::address(bus.address.as_str())?
                    .name(NAME)?
                    .serve_at(PATH, manager)?
                    .build()
                    .await
            })
            .expect("serve org.freedesktop.login1 on the test bus");
        LoginManager { rt, connection, locks }
    }

    /// Emits `PrepareForShutdown(start)`: true, the machine shuts down; false, called off.
    pub fn prepare_for_shutdown(&self, start: bool) {
        self.rt
            .block_on(async {
                let emitter = SignalEmitter::new(&self.connection, PATH)?;
                Manager::prepare_for_shutdown(&emitter, start).await
            })
            .expect("emit PrepareForShutdown");
    }

    /// Every lock handed out so far, in order.
    pub fn locks(&self) -> Vec<Lock> {
        self.locks.lock().expect("locks").clone()
    }

    /// Waits until `check` holds for the locks, or panics after `timeout`.
    pub fn wait_locks(&self, what: &str, timeout: Duration, check: impl Fn(&[Lock]) -> bool) {
        let end = Instant::now() + timeout;
        loop {
            let locks = self.locks();
            if check(&locks) {
                return;
            }
            assert!(Instant::now() < end, "timed out waiting for {what}: {locks:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
