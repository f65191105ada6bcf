//! The device plugins' side of the device manager (D1, D2), driven with the real test
//! device plugin (`tests/device-plugin`) as a child process, on real sockets in a test
//! directory: `outpost::devices::plugins::start` serves `kubelet.sock`, and each test
//! reads the events it sends the manager.

use std::path::PathBuf;
use std::time::Duration;

use outpost::devices::plugins::{self, CHECKPOINT, PluginEvent, Settings};
use outpost::task::Tasks;
use outpost_kubelet_api::deviceplugin::v1beta1 as api;
use outpost_tests::device_plugin::{PluginArgs, PluginProcess};
use outpost_tests::pods::eventually;
use tokio::sync::mpsc;

const SERIAL: &str = "example.com/serial";
/// How long an expected event may take before the test says which one never came (a
/// guard against a hang, not a measure).
const WAIT: Duration = Duration::from_secs(60);

/// A device-plugin directory in a temporary directory, served by `plugins::start`.
struct Harness {
    dir: tempfile::TempDir,
    events: mpsc::Receiver<PluginEvent>,
    tasks: Option<Tasks>,
}

impl Harness {
    /// The directory, not served yet.
    fn new() -> (Harness, mpsc::Sender<PluginEvent>) {
        let dir = tempfile::Builder::new().prefix("odp").tempdir_in("/tmp").unwrap();
        let (sender, events) = mpsc::channel(64);
        (Harness { dir, events, tasks: None }, sender)
    }

    /// The directory, served.
    fn start() -> Harness {
        let (mut harness, sender) = Harness::new();
        harness.serve(sender);
        harness
    }

    fn serve(&mut self, sender: mpsc::Sender<PluginEvent>) {
        let settings = Settings { plugin_dir: self.plugin_dir() };
        let task = plugins::start(settings, sender).unwrap();
        self.tasks = Some(Tasks::spawn(vec![task]));
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn plugin_dir(&self) -> PathBuf {
        self.path("device-plugins")
    }

    fn kubelet_sock(&self) -> PathBuf {
        self.plugin_dir().join("kubelet.sock")
    }

    fn plugin(&self, args: &PluginArgs) -> PluginProcess {
        let stderr = self.path(&format!("{}.stderr", args.socket));
        PluginProcess::start(&self.plugin_dir(), args, &stderr)
    }

    async fn next(&mut self) -> PluginEvent {
        match tokio::time::timeout(WAIT, self.events.recv()).await {
            Ok(Some(event)) => event,
            Ok(None) => panic!("the device plugins' task ended"),
            Err(_) => panic!("no event from the device plugins' task within {WAIT:?}"),
        }
    }

    /// The next `Registered`, its endpoint (other events skipped).
    async fn registered(&mut self, resource: &str) -> plugins::Endpoint {
        loop {
            if let PluginEvent::Registered { resource: r, endpoint } = self.next().await
                && r == resource
            {
                return endpoint;
            }
        }
    }

    /// The next device list: its devices (other events skipped).
    async fn devices(&mut self) -> Vec<api::Device> {
        loop {
            if let PluginEvent::Devices { devices, .. } = self.next().await {
                return devices;
            }
        }
    }

    /// Stops the task, which removes `kubelet.sock`.
    async fn stop(&mut self) {
        if let Some(tasks) = self.tasks.take() {
            tasks.stop().await;
        }
        assert!(!self.kubelet_sock().exists(), "kubelet.sock is removed when the task stops");
    }
}

fn health(devices: &[api::Device]) -> Vec<(&str, &str)> {
    devices.iter().map(|d| (d.id.as_str(), d.health.as_str())).collect()
}

/// A plugin of two devices with a health directory, both its options set and a
/// pre-start log, in the harness's directory.
fn serial_plugin(h: &Harness) -> PluginArgs {
    let mut args = PluginArgs::new(SERIAL, "serial.sock")
        .device("serial1", &h.path("dev/serial1"))
        .device("serial0", &h.path("dev/serial0"))
        .flags(&[
            "--mount",
            "/opt/serial/lib:/usr/lib/serial:ro",
            "--annotation",
            "example.com/port=1",
            "--cdi-device",
            "example.com/serial=port0",
        ]);
    args.health_dir = Some(h.path("health"));
    args.pre_start_log = Some(h.path("pre-start.log"));
    args.pre_start_required = true;
    args.preferred_allocation = true;
    args
}

/// D1, D2: a plugin registers; the manager is told (its endpoint, with the options the
/// plugin gave) and gets its device list; the endpoint's calls reach the plugin:
/// `GetPreferredAllocation`, `Allocate` (a DeviceSpec per device, `rw`, the env, mounts,
/// annotations, CDI names) and `PreStartContainer`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_d2_a_plugin_registers_lists_its_devices_and_answers_the_manager() {
    let mut h = Harness::start();
    let _plugin = h.plugin(&serial_plugin(&h));
    let endpoint = h.registered(SERIAL).await;
    assert_eq!(endpoint.socket(), h.plugin_dir().join("serial.sock"));
    assert!(endpoint.options().pre_start_required);
    assert!(endpoint.options().get_preferred_allocation_available);
    assert_eq!(health(&h.devices().await), [("serial1", "Healthy"), ("serial0", "Healthy")]);

    let available = vec!["serial1".to_owned(), "serial0".to_owned()];
    let preferred = endpoint.preferred_allocation(available, vec![], 1).await.unwrap();
    assert_eq!(preferred, Some(vec!["serial0".to_owned()]));

    let answer = endpoint.allocate(vec!["serial0".to_owned()]).await.unwrap();
    let path = h.path("dev/serial0").display().to_string();
    assert_eq!(
        answer.devices,
        [api::DeviceSpec {
            container_path: path.clone(),
            host_path: path,
            permissions: "rw".into()
        }]
    );
    assert_eq!(answer.envs.get("OUTPOST_TEST_DEVICES").map(String::as_str), Some("serial0"));
    assert_eq!(
        answer.mounts,
        [api::Mount {
            container_path: "/usr/lib/serial".into(),
            host_path: "/opt/serial/lib".into(),
            read_only: true
        }]
    );
    assert_eq!(answer.annotations.get("example.com/port").map(String::as_str), Some("1"));
    assert_eq!(answer.cdi_devices, [api::CdiDevice { name: "example.com/serial=port0".into() }]);

    endpoint.pre_start(vec!["serial0".to_owned()]).await.unwrap();
    assert_eq!(std::fs::read_to_string(h.path("pre-start.log")).unwrap(), "serial0\n");
    h.stop().await;
}

/// D1: a device's health flips are new device lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_a_device_s_health_flips_are_new_lists() {
    let mut h = Harness::start();
    let _plugin = h.plugin(&serial_plugin(&h));
    h.registered(SERIAL).await;
    assert_eq!(health(&h.devices().await), [("serial1", "Healthy"), ("serial0", "Healthy")]);
    std::fs::write(h.path("health/serial0"), "").unwrap();
    assert_eq!(health(&h.devices().await), [("serial1", "Healthy"), ("serial0", "Unhealthy")]);
    std::fs::remove_file(h.path("health/serial0")).unwrap();
    assert_eq!(health(&h.devices().await), [("serial1", "Healthy"), ("serial0", "Healthy")]);
    h.stop().await;
}

/// D1: a plugin that dies is stopped (its stream ends); started again, it registers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_a_restarted_plugin_registers_again() {
    let mut h = Harness::start();
    let args = serial_plugin(&h);
    let mut plugin = h.plugin(&args);
    h.registered(SERIAL).await;
    h.devices().await;
    plugin.kill();
    match h.next().await {
        PluginEvent::Stopped { resource, endpoint } => {
            assert_eq!(resource, SERIAL);
            assert_eq!(endpoint, h.plugin_dir().join("serial.sock"));
        }
        other => panic!("expected the endpoint stopped, got {other:?}"),
    }
    let _plugin = h.plugin(&args);
    let endpoint = h.registered(SERIAL).await;
    assert_eq!(endpoint.socket(), h.plugin_dir().join("serial.sock"));
    assert_eq!(health(&h.devices().await), [("serial1", "Healthy"), ("serial0", "Healthy")]);
    h.stop().await;
}

/// D1: a second plugin registering for a resource replaces the first's endpoint: once
/// the new one is registered, no list of the old one's reaches the manager.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_a_plugin_registering_again_replaces_the_old_endpoint() {
    let mut h = Harness::start();
    let mut old = PluginArgs::new(SERIAL, "old.sock").device("old0", &h.path("dev/old0"));
    old.health_dir = Some(h.path("old-health"));
    let mut new = PluginArgs::new(SERIAL, "new.sock").device("new0", &h.path("dev/new0"));
    new.health_dir = Some(h.path("new-health"));
    let _old = h.plugin(&old);
    h.registered(SERIAL).await;
    assert_eq!(health(&h.devices().await), [("old0", "Healthy")]);
    let _new = h.plugin(&new);
    match h.next().await {
        PluginEvent::Registered { endpoint, .. } => {
            assert_eq!(endpoint.socket(), h.plugin_dir().join("new.sock"));
        }
        other => panic!("expected the new endpoint registered, got {other:?}"),
    }
    // The old plugin's list changes first, then the new one's: only the new one's is seen.
    std::fs::write(h.path("old-health/old0"), "").unwrap();
    std::fs::write(h.path("new-health/new0"), "").unwrap();
    loop {
        match h.next().await {
            PluginEvent::Devices { devices, .. } => {
                assert!(
                    devices.iter().all(|d| d.id == "new0"),
                    "the old endpoint's list: {devices:?}"
                );
                if health(&devices) == [("new0", "Unhealthy")] {
                    break;
                }
            }
            other => panic!("expected the new plugin's lists, got {other:?}"),
        }
    }
    h.stop().await;
}

/// D1: a plugin whose socket is removed is stopped, seen through inotify (its process and
/// its stream are still there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_a_removed_plugin_socket_stops_its_endpoint() {
    let mut h = Harness::start();
    let _plugin = h.plugin(&serial_plugin(&h));
    h.registered(SERIAL).await;
    h.devices().await;
    std::fs::remove_file(h.plugin_dir().join("serial.sock")).unwrap();
    match h.next().await {
        PluginEvent::Stopped { resource, endpoint } => {
            assert_eq!(resource, SERIAL);
            assert_eq!(endpoint, h.plugin_dir().join("serial.sock"));
        }
        other => panic!("expected the endpoint stopped, got {other:?}"),
    }
    h.stop().await;
}

/// D1: `kubelet.sock` removed by someone is served again, and the plugins, which watch
/// for it, register again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_a_removed_kubelet_sock_is_served_again_and_plugins_register_again() {
    let mut h = Harness::start();
    let plugin = h.plugin(&serial_plugin(&h));
    h.registered(SERIAL).await;
    std::fs::remove_file(h.kubelet_sock()).unwrap();
    let endpoint = h.registered(SERIAL).await;
    assert_eq!(endpoint.socket(), h.plugin_dir().join("serial.sock"));
    assert!(
        plugin.stderr().contains("made again: serving and registering again"),
        "{}",
        plugin.stderr()
    );
    // The endpoint registered on the socket served again works.
    let answer = endpoint.allocate(vec!["serial1".to_owned()]).await.unwrap();
    assert_eq!(answer.envs.get("OUTPOST_TEST_DEVICES").map(String::as_str), Some("serial1"));
    h.stop().await;
}

/// D1: a registration with an API version kubelet does not serve, or a resource name
/// that is not an extended resource's, is refused with kubelet's words, and the manager
/// hears nothing of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_a_bad_version_or_resource_name_is_refused_with_kubelet_s_message() {
    let mut h = Harness::start();
    let cases = [
        (
            PluginArgs::new(SERIAL, "old-api.sock").flags(&["--api-version", "v1alpha1"]),
            "requested API version \"v1alpha1\" is not supported by kubelet. Supported version \
             is [\"v1beta1\"]",
        ),
        (PluginArgs::new("serial", "bare.sock"), "the ResourceName \"serial\" is invalid"),
        (
            PluginArgs::new("kubernetes.io/serial", "native.sock"),
            "the ResourceName \"kubernetes.io/serial\" is invalid",
        ),
    ];
    for (args, message) in cases {
        let mut plugin = h.plugin(&args);
        let (status, stderr) = plugin.wait_exit(WAIT);
        assert!(!status.success(), "{stderr}");
        assert!(stderr.contains(&format!("refused: {message}")), "{stderr}");
    }
    assert!(h.events.try_recv().is_err(), "a refused plugin is never the manager's");
    h.stop().await;
}

/// D1: at start the directory's sockets are removed (a stale one, and a running
/// plugin's, which therefore registers again when `kubelet.sock` appears); the
/// checkpoint and other files stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_start_removes_the_sockets_and_running_plugins_register_again() {
    let (mut h, sender) = Harness::new();
    std::fs::create_dir_all(h.plugin_dir()).unwrap();
    std::fs::write(h.plugin_dir().join(CHECKPOINT), "{\"Data\":{}}").unwrap();
    std::fs::write(h.plugin_dir().join("notes"), "kept").unwrap();
    drop(std::os::unix::net::UnixListener::bind(h.plugin_dir().join("stale.sock")).unwrap());
    let plugin = h.plugin(&serial_plugin(&h));
    let socket = h.plugin_dir().join("serial.sock");
    eventually("the plugin serves, waiting for kubelet.sock", WAIT, || socket.exists());
    assert!(plugin.stderr().contains("waiting for"), "{}", plugin.stderr());
    h.serve(sender);
    h.registered(SERIAL).await;
    assert!(!h.plugin_dir().join("stale.sock").exists());
    assert_eq!(std::fs::read_to_string(h.plugin_dir().join(CHECKPOINT)).unwrap(), "{\"Data\":{}}");
    assert_eq!(std::fs::read_to_string(h.plugin_dir().join("notes")).unwrap(), "kept");
    assert!(plugin.stderr().contains("made again"), "{}", plugin.stderr());
    h.stop().await;
}
