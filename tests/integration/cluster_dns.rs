//! End to end: cluster DNS (SEMANTICS.md K2) with a real DNS server. Debian's dnsmasq
//! answers in a network namespace of the test's own, on an address of the node's pod
//! subnet: a veth pair joins that namespace to the bridge the node's pods are on. Real
//! pods (static ones: kubelet gives them cluster DNS too) get kubelet's resolv.conf and
//! resolve the cluster's names through dnsmasq.

use outpost_tests::needs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::{Node, eventually, wait_pod};
use outpost_tests::workload::{
    Workload, delete_and_wait, event_count, is_running, status_of, text,
};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(60);
const DNSMASQ: &str = "/usr/sbin/dnsmasq";
/// What dnsmasq answers: the API server's Service and a test Service.
const KUBERNETES: (&str, &str) = ("kubernetes.default.svc.cluster.local", "10.96.0.1");
const WEB: (&str, &str) = ("web.default.svc.cluster.local", "10.96.7.7");
/// The node's resolv.conf the agent is given (`--resolv-conf`).
const NODE_RESOLV_CONF: &str =
    "# the test node's\nnameserver 192.0.2.1\nsearch lan example.com.\noptions timeout:1\n";

/// `ip` with `args`; it must succeed.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(out.status.success(), "ip {args:?}: {}", text(&out));
}

/// dnsmasq in a network namespace whose veth end has `address` (in the node's pod subnet)
/// and whose other end is on the node's bridge. Dropping it stops dnsmasq and removes
/// the namespace and the veth pair, also when the test fails.
struct DnsServer {
    netns: String,
    host_veth: String,
    dnsmasq: Option<Child>,
    address: String,
}

impl DnsServer {
    fn start(node: &Node, address: &str) -> DnsServer {
        // Under CI=true the test runs whatever is installed: say what is missing.
        assert!(
            std::path::Path::new(DNSMASQ).is_file(),
            "{DNSMASQ} is missing: install dnsmasq-base (cargo xtask deps)"
        );
        let id = std::process::id() % 10_000_000;
        let mut server = DnsServer {
            netns: format!("outpost-k2-{id}"),
            host_veth: format!("k2h{id}"),
            dnsmasq: None,
            address: address.to_owned(),
        };
        let ns_veth = format!("k2n{id}");
        // The bridge CNI's bridge plugin then uses (it makes it only at the first pod).
        if Command::new("ip")
            .args(["link", "show", &node.bridge])
            .output()
            .is_ok_and(|o| !o.status.success())
        {
            ip(&["link", "add", &node.bridge, "type", "bridge"]);
        }
        ip(&["link", "set", &node.bridge, "up"]);
        ip(&["netns", "add", &server.netns]);
        ip(&[
            "link",
            "add",
            &server.host_veth,
            "type",
            "veth",
            "peer",
            "name",
            &ns_veth,
            "netns",
            &server.netns,
        ]);
        ip(&["link", "set", &server.host_veth, "master", &node.bridge, "up"]);
        ip(&["-n", &server.netns, "addr", "add", &format!("{address}/24"), "dev", &ns_veth]);
        ip(&["-n", &server.netns, "link", "set", &ns_veth, "up"]);
        ip(&["-n", &server.netns, "link", "set", "lo", "up"]);
        let pid_file = node.path("dnsmasq.pid");
        let child = Command::new("ip")
            .args(["netns", "exec", &server.netns, DNSMASQ])
            .args(["--keep-in-foreground", "--no-resolv", "--no-hosts", "--conf-file=/dev/null"])
            .arg(format!("--pid-file={}", pid_file.display()))
            .args(["--bind-interfaces", &format!("--listen-address={address}"), "--log-facility=-"])
            // The cluster's zone is dnsmasq's own: names it has no record of are NXDOMAIN,
            // and AAAA queries of those it has are answered empty (as CoreDNS's).
            .arg("--local=/cluster.local/")
            .arg(format!("--host-record={},{}", KUBERNETES.0, KUBERNETES.1))
            .arg(format!("--host-record={},{}", WEB.0, WEB.1))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start dnsmasq");
        server.dnsmasq = Some(child);
        // Serving: it answers a query in its namespace.
        eventually("dnsmasq answers", LONG, || server.lookup_from_netns(KUBERNETES.0));
        server
    }

    fn lookup_from_netns(&self, name: &str) -> bool {
        Command::new("ip")
            .args(["netns", "exec", &self.netns, "busybox", "nslookup", name, &self.address])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("Address: 10.96."))
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.dnsmasq.take() {
            // dnsmasq runs as `ip netns exec`'s child process image (exec), the one started.
            let _ = child.kill();
            let _ = child.wait();
        }
        // Removing the namespace removes its veth end, and so the pair.
        let _ = Command::new("ip").args(["netns", "delete", &self.netns]).output();
        let _ = Command::new("ip").args(["link", "delete", &self.host_veth]).output();
    }
}

/// The address `.250` of the node's `/24` pod subnet (host-local hands out from `.2`).
fn dns_address(node: &Node) -> String {
    let base = node.subnet.trim_end_matches("0/24");
    format!("{base}250")
}

fn sleeper() -> String {
    format!(
        "  containers:\n  - name: app\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: Never\n    command: [sh, -c, 'trap \"exit 0\" TERM; while true; do sleep 1; done']\n"
    )
}

fn run_pod(node: &Node, w: &Workload, name: &str, spec: &str) -> Value {
    node.put(
        &format!("{name}.yaml"),
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{spec}{}",
            sleeper()
        ),
    );
    wait_pod(&w.agent, &format!("{name}-edge-1"), LONG, |p| is_running(status_of(p, "app")))
}

fn exec(w: &Workload, pod: &str, command: &[&str]) -> String {
    let out = w.exec(&format!("default/{pod}-edge-1"), Some("app"), command);
    assert!(out.status.success(), "exec {command:?} in {pod}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// K2: a ClusterFirst pod gets kubelet's cluster resolv.conf and resolves the API
/// server's Service and a test Service through the cluster DNS server; a
/// ClusterFirstWithHostNet pod gets the same file, a None pod its dnsConfig; too many
/// nameservers are cut with kubelet's DNSConfigForming Event, once.
#[needs(pods, dnsmasq)]
#[test]
fn k2_cluster_first_pods_resolve_through_the_cluster_dns_server() {
    let node = Node::new();
    let address = dns_address(&node);
    let dns = DnsServer::start(&node, &address);
    let resolv_conf: PathBuf = node.path("node-resolv.conf");
    std::fs::write(&resolv_conf, NODE_RESOLV_CONF).unwrap();
    let resolv_conf = resolv_conf.display().to_string();
    let w = Workload::start_with(
        &node,
        &[
            "--cluster-dns",
            &address,
            "--cluster-domain",
            "cluster.local",
            "--resolv-conf",
            &resolv_conf,
        ],
    );

    let cluster_file = format!(
        "search default.svc.cluster.local svc.cluster.local cluster.local lan example.com\nnameserver {address}\noptions ndots:5\n"
    );
    run_pod(&node, &w, "cluster", "");
    assert_eq!(exec(&w, "cluster", &["cat", "/etc/resolv.conf"]), cluster_file);
    for (name, ip) in [KUBERNETES, WEB] {
        let answer = exec(&w, "cluster", &["busybox", "nslookup", name]);
        assert!(answer.contains(&format!("Address: {ip}")), "{name}: {answer}");
    }

    // A short name, through the search path (busybox's nslookup tries every domain of
    // it, and fails for the others: its output, not its status).
    let out = w.exec("default/cluster-edge-1", Some("app"), &["busybox", "nslookup", "web"]);
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(answer.contains(&format!("Name:\t{}\nAddress: {}\n", WEB.0, WEB.1)), "{}", text(&out));

    run_pod(&node, &w, "host", "  hostNetwork: true\n  dnsPolicy: ClusterFirstWithHostNet\n");
    assert_eq!(exec(&w, "host", &["cat", "/etc/resolv.conf"]), cluster_file);

    let none = format!(
        "  dnsPolicy: None\n  dnsConfig:\n    nameservers: [{address}]\n    searches: [corp.example]\n    options:\n    - {{name: ndots, value: '2'}}\n"
    );
    run_pod(&node, &w, "none", &none);
    assert_eq!(
        exec(&w, "none", &["cat", "/etc/resolv.conf"]),
        format!("search corp.example\nnameserver {address}\noptions ndots:2\n")
    );
    let answer = exec(&w, "none", &["busybox", "nslookup", WEB.0]);
    assert!(answer.contains(&format!("Address: {}", WEB.1)), "{answer}");

    let many = "  dnsConfig:\n    nameservers: [192.0.2.11, 192.0.2.12, 192.0.2.13]\n";
    run_pod(&node, &w, "many", many);
    let applied = format!("{address} 192.0.2.11 192.0.2.12");
    let file = exec(&w, "many", &["cat", "/etc/resolv.conf"]);
    let servers: Vec<&str> = file.lines().filter_map(|l| l.strip_prefix("nameserver ")).collect();
    assert_eq!(servers.join(" "), applied, "{file}");
    let prefix = format!(
        "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: {applied}"
    );
    // Recorded once, though the sandbox set-up may run again.
    eventually("the DNSConfigForming Event", LONG, || {
        event_count(&w.events("default", "many-edge-1"), "DNSConfigForming", &prefix) == 1
    });
    for pod in ["cluster", "host", "none"] {
        let events = w.events("default", &format!("{pod}-edge-1"));
        assert_eq!(event_count(&events, "MissingClusterDNS", ""), 0, "{events:?}");
        assert_eq!(event_count(&events, "DNSConfigForming", ""), 0, "{events:?}");
    }

    let pods = [
        ("cluster.yaml", "cluster-edge-1"),
        ("host.yaml", "host-edge-1"),
        ("none.yaml", "none-edge-1"),
        ("many.yaml", "many-edge-1"),
    ];
    delete_and_wait(&node, &w.agent, &pods);
    drop(w);
    drop(dns);
}
