//! Pod namespaces (`runtime::netns`) and the CNI client (`runtime::cni`) with the real
//! plugins (containernetworking-plugins in /usr/lib/cni), as root. Each test has its own
//! conf dir, cache dir, network name, bridge and /24, so tests run in parallel and never
//! touch /etc/cni/net.d; the bridge and any attachment left over are removed on drop.

use outpost_tests::needs;
use outpost_tests::propagation::MountUser;
use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use outpost::host::Kernel;
use outpost::runtime::cni::conf::DefaultNetwork;
use outpost::runtime::cni::{self, Attachment, Cni, CniConfig, PortMapping, Protocol};
use outpost::runtime::netns::{PodNamespaces, Sharing};

const PLUGINS: &str = "/usr/lib/cni";

/// Fails the test without the tools (tests carry `outpost_has_cni`).
fn have_tools() {
    outpost_tests::prerequisite(
        outpost_tests::is_root()
            && Path::new(PLUGINS).join("bridge").is_file()
            && ["nsenter", "ip", "busybox", "iptables"].iter().all(|tool| {
                Command::new("sh")
                    .args(["-c", &format!("command -v {tool}")])
                    .stdout(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            }),
        "root, containernetworking-plugins in /usr/lib/cni, nsenter, ip, iptables and busybox",
    )
}

/// Runs a command, returning its stdout; panics if it fails.
fn run(program: &str, args: &[&str]) -> String {
    let output = Command::new(program).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn in_netns(netns: &Path, args: &[&str]) -> String {
    let net = format!("--net={}", netns.display());
    let mut all = vec![net.as_str()];
    all.extend_from_slice(args);
    run("nsenter", &all)
}

/// A /24 in 10.201.0.0/16 that no route on the host covers and no other test took.
fn free_subnet() -> u8 {
    static TAKEN: Mutex<Option<HashSet<u8>>> = Mutex::new(None);
    let routes = run("ip", &["-4", "-o", "route", "show", "table", "all"]);
    let mut taken = TAKEN.lock().unwrap();
    let taken = taken.get_or_insert_with(HashSet::new);
    loop {
        let third = fastrand::u8(..);
        if !routes.contains(&format!("10.201.{third}.")) && taken.insert(third) {
            return third;
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One test's network: its own bridge, subnet and directories.
struct Net {
    dir: tempfile::TempDir,
    bridge: String,
    name: String,
    subnet: u8,
    cni: Cni,
    /// Its namespaces are host mounts (D6: not while another test has `/` shared).
    _mounts: MountUser,
}

impl Net {
    fn new() -> Net {
        let mounts = MountUser::new();
        let dir = tempfile::tempdir().unwrap();
        let tag = format!("{:08x}", fastrand::u32(..));
        let bridge = format!("opt{tag}");
        let name = format!("optest-{tag}");
        let subnet = free_subnet();
        let network = DefaultNetwork {
            name: name.clone(),
            bridge: bridge.clone(),
            subnet: (Ipv4Addr::new(10, 201, subnet, 0), 24),
            data_dir: dir.path().join("ipam"),
        };
        std::fs::create_dir(dir.path().join("net.d")).unwrap();
        std::fs::write(dir.path().join("net.d/10-test.conflist"), network.conflist().to_string())
            .unwrap();
        let cni = Cni::new(CniConfig {
            conf_dir: dir.path().join("net.d"),
            bin_dirs: vec![PathBuf::from("/opt/cni/bin"), PathBuf::from(PLUGINS)],
            cache_dir: dir.path().join("cache"),
        });
        Net { dir, bridge, name, subnet, cni, _mounts: mounts }
    }

    fn conf(&self) -> PathBuf {
        self.dir.path().join("net.d/10-test.conflist")
    }

    fn namespaces(&self, pod: &str) -> PathBuf {
        let dir = self.dir.path().join("pods").join(pod).join("ns");
        let ns = PodNamespaces::create(&dir, Sharing::default()).unwrap();
        ns.network.unwrap()
    }

    fn attachment(&self, id: &str, netns: &Path, ports: Vec<PortMapping>) -> Attachment {
        Attachment {
            id: id.to_owned(),
            netns: netns.to_path_buf(),
            interface: "eth0".to_owned(),
            pod_namespace: "test".to_owned(),
            pod_name: format!("pod-{id}"),
            pod_uid: id.to_owned(),
            ports,
        }
    }

    /// host-local's allocation file of `ip`.
    fn allocation(&self, ip: IpAddr) -> PathBuf {
        self.dir.path().join("ipam").join(&self.name).join(ip.to_string())
    }

    fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 201, self.subnet, 1)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // DEL what a failed test left attached (iptables rules), from a runtime of its own.
        let cni = self.cni.clone();
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
            for id in cni.attached().unwrap_or_default() {
                if let Ok(runtime) = &runtime {
                    let _ = runtime.block_on(cni.del(&id));
                }
            }
        })
        .join();
        if let Ok(pods) = std::fs::read_dir(self.dir.path().join("pods")) {
            for pod in pods.flatten() {
                let _ = PodNamespaces::remove(&Kernel, &pod.path().join("ns"));
            }
        }
        let _ =
            Command::new("ip").args(["link", "del", &self.bridge]).stderr(Stdio::null()).status();
        remove_masquerade_rules(&self.name);
    }
}

/// Deletes the bridge plugin's masquerade rules of network `name`. A DEL without the
/// netns (`del_after_the_netns_is_gone_still_frees_the_address`) leaves them: bridge
/// 1.1.1 learns the addresses to unmasquerade from the pod's interface. (The agent meets a
/// gone netns after a reboot, when iptables holds none of them.)
fn remove_masquerade_rules(name: &str) {
    let Ok(rules) = Command::new("iptables-save").args(["-t", "nat"]).output() else { return };
    let tag = format!("name: \\\"{name}\\\"");
    for rule in String::from_utf8_lossy(&rules.stdout).lines() {
        let Some(spec) = rule.strip_prefix("-A POSTROUTING ").filter(|_| rule.contains(&tag))
        else {
            continue;
        };
        let Some(chain) = spec.rsplit("-j ").next() else { continue };
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!("iptables -w -t nat -D POSTROUTING {spec}"))
            .status();
        for flag in ["-F", "-X"] {
            let _ = Command::new("iptables").args(["-w", "-t", "nat", flag, chain]).status();
        }
    }
}

/// `GET /` over plain TCP, retried until `deadline` (the server may still be starting).
fn http_get(address: SocketAddr, deadline: Duration) -> Result<String, String> {
    let start = Instant::now();
    loop {
        let attempt = (|| -> std::io::Result<String> {
            let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(2))?;
            stream.set_read_timeout(Some(Duration::from_secs(5)))?;
            stream.write_all(b"GET /ok.txt HTTP/1.0\r\nHost: pod\r\n\r\n")?;
            let mut response = String::new();
            stream.read_to_string(&mut response)?;
            Ok(response)
        })();
        match attempt {
            Ok(response) if response.contains("200 OK") => return Ok(response),
            other if start.elapsed() > deadline => return Err(format!("{other:?}")),
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// busybox httpd inside the pod's netns, serving `ok.txt`; killed on drop.
struct Server(Child);

impl Server {
    fn start(netns: &Path, www: &Path, port: u16) -> Server {
        std::fs::create_dir_all(www).unwrap();
        std::fs::write(www.join("ok.txt"), "hello from the pod\n").unwrap();
        let child = Command::new("nsenter")
            .arg(format!("--net={}", netns.display()))
            .args(["busybox", "httpd", "-f", "-p", &port.to_string(), "-h"])
            .arg(www)
            .spawn()
            .unwrap();
        Server(child)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[needs(cni)]
#[test]
fn pod_namespaces_are_real_namespaces_that_outlive_their_thread() {
    have_tools();
    let dir = tempfile::tempdir().unwrap();
    let ns_dir = dir.path().join("pod/ns");
    let ns = PodNamespaces::create(&ns_dir, Sharing::default()).unwrap();
    let (net, ipc, uts) =
        (ns.network.clone().unwrap(), ns.ipc.clone().unwrap(), ns.uts.clone().unwrap());
    // The thread that made them is gone; nsenter joins them through the files.
    let host = run("readlink", &["/proc/self/ns/net"]);
    let inside = in_netns(&net, &["readlink", "/proc/self/ns/net"]);
    assert_ne!(host, inside);
    let links = in_netns(&net, &["ip", "-o", "link"]);
    assert_eq!(links.lines().count(), 1, "a new netns has only lo: {links}");
    assert!(links.contains(",UP"), "lo is up from the start, without the loopback plugin: {links}");
    run("nsenter", &[&format!("--ipc={}", ipc.display()), "true"]);
    run("nsenter", &[&format!("--uts={}", uts.display()), "hostname"]);
    assert_eq!(run("findmnt", &["-no", "PROPAGATION", ns_dir.to_str().unwrap()]).trim(), "shared");

    // Idempotent: the same namespaces are kept.
    let inode = std::fs::metadata(&net).unwrap().ino();
    assert_eq!(PodNamespaces::create(&ns_dir, Sharing::default()).unwrap(), ns);
    assert_eq!(std::fs::metadata(&net).unwrap().ino(), inode);

    PodNamespaces::remove(&Kernel, &ns_dir).unwrap();
    assert!(!ns_dir.exists());
    PodNamespaces::remove(&Kernel, &ns_dir).unwrap();

    let host_net = Sharing { host_network: true, host_ipc: false };
    let ns = PodNamespaces::create(&ns_dir, host_net).unwrap();
    assert_eq!((ns.network.is_none(), ns.uts.is_none(), ns.ipc.is_some()), (true, true, true));
    PodNamespaces::remove(&Kernel, &ns_dir).unwrap();
}

#[needs(cni)]
#[tokio::test]
async fn add_wires_the_pod_and_del_frees_its_address() {
    have_tools();
    let net = Net::new();
    let netns = net.namespaces("a");
    let host_port = free_port();
    let port =
        PortMapping { host_port, container_port: 8080, protocol: Protocol::Tcp, host_ip: None };
    let network = net.cni.add(&net.attachment("pod-a", &netns, vec![port])).await.unwrap();
    let IpAddr::V4(ip) = network.ips[0] else { panic!("{network:?}") };
    assert_eq!(ip.octets()[..3], [10, 201, net.subnet]);

    let addresses = in_netns(&netns, &["ip", "-o", "addr"]);
    assert!(addresses.contains(&format!("eth0    inet {ip}/24")), "{addresses}");
    assert!(addresses.contains("lo    inet 127.0.0.1/8"), "{addresses}");
    let lo = in_netns(&netns, &["ip", "-o", "link", "show", "lo"]);
    assert!(lo.contains(",UP"), "{lo}");
    assert!(net.allocation(network.ips[0]).is_file());
    assert_eq!(net.cni.attached().unwrap(), ["pod-a"]);

    let _server = Server::start(&netns, &net.dir.path().join("www"), 8080);
    let deadline = Duration::from_secs(30);
    let direct = SocketAddr::new(ip.into(), 8080);
    http_get(direct, deadline).unwrap_or_else(|e| panic!("pod IP {direct}: {e}"));
    // hostPort via portmap: on the bridge's address, and on 127.0.0.1 (portmap's `snat`
    // sets route_localnet on the bridge and masquerades localhost traffic).
    let on_bridge = SocketAddr::new(net.gateway().into(), host_port);
    http_get(on_bridge, deadline).unwrap_or_else(|e| panic!("hostPort on {on_bridge}: {e}"));
    let on_localhost = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), host_port);
    http_get(on_localhost, deadline).unwrap_or_else(|e| panic!("hostPort on {on_localhost}: {e}"));

    net.cni.del("pod-a").await.unwrap();
    assert!(!net.allocation(network.ips[0]).exists(), "host-local freed the address");
    let links = in_netns(&netns, &["ip", "-o", "link"]);
    assert!(!links.contains("eth0"), "{links}");
    assert_eq!(net.cni.attached().unwrap(), Vec::<String>::new());
    let rules = run("iptables-save", &["-t", "nat"]);
    assert!(!rules.contains("pod-a"), "portmap and masquerade rules are gone: {rules}");
    // DEL again, and of an id never added: nothing to do.
    net.cni.del("pod-a").await.unwrap();
    net.cni.del("never-added").await.unwrap();
}

#[needs(cni)]
#[tokio::test]
async fn del_after_the_netns_is_gone_still_frees_the_address() {
    have_tools();
    let net = Net::new();
    let netns = net.namespaces("b");
    let network = net.cni.add(&net.attachment("pod-b", &netns, Vec::new())).await.unwrap();
    assert!(net.allocation(network.ips[0]).is_file());
    PodNamespaces::remove(&Kernel, netns.parent().unwrap()).unwrap();
    net.cni.del("pod-b").await.unwrap();
    assert!(!net.allocation(network.ips[0]).exists(), "host-local freed the address");
    assert_eq!(net.cni.attached().unwrap(), Vec::<String>::new());
}

#[needs(cni)]
#[tokio::test]
async fn a_broken_conflist_is_a_clear_error() {
    have_tools();
    let net = Net::new();
    let netns = net.namespaces("c");
    std::fs::write(
        net.conf(),
        r#"{"cniVersion": "1.0.0", "name": "x", "plugins": [{"bridge": "b"}]}"#,
    )
    .unwrap();
    let error = net.cni.add(&net.attachment("pod-c", &netns, Vec::new())).await.unwrap_err();
    let text = outpost::error_chain::describe(&error);
    assert!(
        text.contains(&format!(
            "plugin 0 of CNI config {} is not an object with a \"type\"",
            net.conf().display()
        )),
        "{text}"
    );
    assert_eq!(net.cni.attached().unwrap(), Vec::<String>::new());
}

#[needs(cni)]
#[tokio::test]
async fn a_missing_plugin_is_a_clear_error_and_the_address_is_freed() {
    have_tools();
    let net = Net::new();
    let netns = net.namespaces("d");
    let mut document: serde_json::Value =
        serde_json::from_slice(&std::fs::read(net.conf()).unwrap()).unwrap();
    document["plugins"][1]["type"] = "no-such-plugin".into();
    std::fs::write(net.conf(), document.to_string()).unwrap();
    let error = net.cni.add(&net.attachment("pod-d", &netns, Vec::new())).await.unwrap_err();
    assert!(matches!(error, cni::Error::PluginMissing { .. }), "{error:?}");
    let text = error.to_string();
    assert!(text.contains("CNI plugin no-such-plugin"), "{text}");
    assert!(text.contains(&net.conf().display().to_string()), "{text}");
    // The bridge plugin ran before it; its address was given back.
    let allocated: Vec<_> = std::fs::read_dir(net.dir.path().join("ipam").join(&net.name))
        .map(|dir| dir.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        allocated.iter().all(|name| !name.to_string_lossy().starts_with("10.")),
        "{allocated:?}"
    );
    assert_eq!(net.cni.attached().unwrap(), Vec::<String>::new());
}

#[test]
fn the_default_config_is_written_once_and_an_existing_one_kept() {
    let dir = tempfile::tempdir().unwrap();
    let cni = Cni::new(CniConfig {
        conf_dir: dir.path().join("net.d"),
        bin_dirs: vec![PathBuf::from(PLUGINS)],
        cache_dir: dir.path().join("cache"),
    });
    let file = cni.ensure_default_config().unwrap().unwrap();
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.contains("\"outpost0\"") && written.contains("10.42.0.0/16"), "{written}");
    assert_eq!(cni.ensure_default_config().unwrap(), None);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), written);
    std::fs::remove_file(&file).unwrap();
    std::fs::write(dir.path().join("net.d/99-mine.conf"), "{}").unwrap();
    assert_eq!(cni.ensure_default_config().unwrap(), None);
    assert!(!file.exists());
}
