//! A device plugin for Outpost's tests, built as real ones are (the Kubernetes sample
//! device plugin, squat's generic-device-plugin): it serves kubelet's `DevicePlugin`
//! service on its own socket in the device-plugin directory, registers with
//! `kubelet.sock` there, and registers again, on a new socket, whenever `kubelet.sock` is
//! made again (the node agent restarted). It watches the directory with inotify.
//!
//! What it serves (D1, D2):
//! - the devices given as `--device ID=/host/path` (character devices the test makes);
//! - their health from `--health-dir`: a device is `Unhealthy` while a file named after
//!   its ID is in that directory (the test makes and removes it; the plugin watches the
//!   directory with inotify and sends its whole list again on each change);
//! - `Allocate`: a `DeviceSpec` per device (the same path in the container, permissions
//!   `rw`), the environment variable `--env` (default `OUTPOST_TEST_DEVICES`) set to the
//!   IDs joined with commas, and the `--mount`s, `--annotation`s and `--cdi-device`s given;
//! - `GetPreferredAllocation` (with `--preferred-allocation`): the `must_include` devices,
//!   then the lowest available IDs (in string order) up to the size asked;
//! - `PreStartContainer` (with `--pre-start-required`): each call's device IDs, joined
//!   with commas, appended as a line to `--pre-start-log`.
//!
//! The chaos suite makes it misbehave with `--control-dir`: while `hang-allocate` is in that
//! directory, `Allocate` hangs; while `hang-list-and-watch` is, `ListAndWatch` sends
//! nothing. Each says so on stderr (`Allocate <ids> hangs`, `ListAndWatch hangs`).
//!
//! A refused registration is printed on stderr (`registering ... refused: <message>`) and
//! the plugin exits with status 1. SIGTERM or SIGINT removes its socket and exits 0.

mod health;
mod kubelet;
mod plugin;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// The plugin's command line.
#[derive(Debug, Parser)]
#[command(name = "outpost-test-device-plugin", about = "A device plugin for Outpost's tests")]
pub struct Args {
    /// The extended resource served, such as `example.com/serial`.
    #[arg(long)]
    pub resource: String,
    /// The plugin's socket: a file name in the device-plugin directory.
    #[arg(long)]
    pub socket: String,
    /// The device-plugin directory (kubelet.sock is there).
    #[arg(long, default_value = "/var/lib/kubelet/device-plugins")]
    pub plugin_dir: PathBuf,
    /// A device: `ID=/host/path`. Repeated.
    #[arg(long = "device", value_parser = device)]
    pub devices: Vec<(String, PathBuf)>,
    /// A device is unhealthy while a file named after its ID is in this directory.
    #[arg(long)]
    pub health_dir: Option<PathBuf>,
    /// The environment variable `Allocate` sets to the devices' IDs.
    #[arg(long, default_value = "OUTPOST_TEST_DEVICES")]
    pub env: String,
    /// A mount `Allocate` adds: `HOST:CONTAINER` or `HOST:CONTAINER:ro`. Repeated.
    #[arg(long = "mount")]
    pub mounts: Vec<String>,
    /// An annotation `Allocate` adds: `KEY=VALUE`. Repeated.
    #[arg(long = "annotation", value_parser = pair)]
    pub annotations: Vec<(String, String)>,
    /// A CDI device `Allocate` names, such as `example.com/serial=port0`. Repeated.
    #[arg(long = "cdi-device")]
    pub cdi_devices: Vec<String>,
    /// Ask for `PreStartContainer` before each start of a container.
    #[arg(long)]
    pub pre_start_required: bool,
    /// Answer `GetPreferredAllocation`.
    #[arg(long)]
    pub preferred_allocation: bool,
    /// Where `PreStartContainer`'s calls are appended, one line of IDs each.
    #[arg(long)]
    pub pre_start_log: Option<PathBuf>,
    /// Where the files that make calls hang are looked for (see above).
    #[arg(long)]
    pub control_dir: Option<PathBuf>,
    /// The API version the plugin registers with.
    #[arg(long, default_value = outpost_kubelet_api::deviceplugin::v1beta1::VERSION)]
    pub api_version: String,
}

fn device(text: &str) -> Result<(String, PathBuf), String> {
    pair(text).map(|(id, path)| (id, PathBuf::from(path)))
}

fn pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("{text:?} is not KEY=VALUE")),
    }
}

/// What stops the plugin.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot serve on {}: {source}", socket.display())]
    Serve {
        socket: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot watch {} with inotify: {source}", dir.display())]
    Watch {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot dial {}: {source}", socket.display())]
    Dial {
        socket: PathBuf,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("registering {resource} with {} refused: {}", socket.display(), status.message())]
    Refused { resource: String, socket: PathBuf, status: tonic::Status },
    #[error("bad --mount {0:?}: HOST:CONTAINER or HOST:CONTAINER:ro")]
    Mount(String),
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(Error::Runtime)
    {
        Ok(runtime) => runtime,
        Err(error) => return fail(&error),
    };
    match runtime.block_on(kubelet::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error),
    }
}

/// Says why on stderr (each error's message names its cause).
fn fail(error: &Error) -> ExitCode {
    eprintln!("outpost-test-device-plugin: {error}");
    ExitCode::FAILURE
}
