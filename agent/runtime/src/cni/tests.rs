//! The client against fake plugins (shell scripts that log their call and print what the
//! test put in `out/`): no root needed. The real plugins are driven by the integration
//! tests (`tests/integration/cni.rs`).

use std::fs;
use std::path::Path;
use std::process::Command as Process;

use serde_json::{Value, json};

use super::*;

const FAKE: &str = r#"#!/bin/sh
root="$(dirname "$0")/.."
name=$(basename "$0")
n=$(ls "$root/log" | wc -l)
log="$root/log/$(printf %02d "$n")-$name-$CNI_COMMAND"
cat > "$log"
echo >> "$log"
env | grep '^CNI_' | sort >> "$log"
out="$root/out/$name-$CNI_COMMAND"
[ -f "$out" ] && cat "$out"
[ -f "$out.rc" ] && exit "$(cat "$out.rc")"
exit 0
"#;

struct Fake {
    dir: tempfile::TempDir,
    cni: Cni,
}

/// One logged plugin call.
#[derive(Debug)]
struct Logged {
    plugin: String,
    command: String,
    stdin: Value,
    env: Vec<String>,
}

impl Fake {
    fn new(plugins: &[&str]) -> Fake {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["bin", "log", "out", "net.d"] {
            fs::create_dir(dir.path().join(sub)).unwrap();
        }
        // Installed by a child process so that this (multi-threaded) test process never
        // holds a writable descriptor of a binary another thread may execute (ETXTBSY).
        let script = dir.path().join("fake.sh");
        fs::write(&script, FAKE).unwrap();
        for plugin in plugins {
            let status = Process::new("install")
                .arg("-m755")
                .arg(&script)
                .arg(dir.path().join("bin").join(plugin))
                .status()
                .unwrap();
            assert!(status.success());
        }
        let cni = Cni::new(CniConfig {
            conf_dir: dir.path().join("net.d"),
            bin_dirs: vec![dir.path().join("missing-bin"), dir.path().join("bin")],
            cache_dir: dir.path().join("cache"),
        });
        Fake { dir, cni }
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    fn conf(&self, name: &str, document: &Value) -> PathBuf {
        let file = self.path("net.d").join(name);
        fs::write(&file, document.to_string()).unwrap();
        file
    }

    fn output(&self, plugin: &str, command: &str, stdout: &str, rc: u8) {
        fs::write(self.path("out").join(format!("{plugin}-{command}")), stdout).unwrap();
        fs::write(self.path("out").join(format!("{plugin}-{command}.rc")), rc.to_string()).unwrap();
    }

    fn log(&self) -> Vec<Logged> {
        let mut names: Vec<_> = fs::read_dir(self.path("log"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
            .iter()
            .map(|name| {
                let text = fs::read_to_string(self.path("log").join(name)).unwrap();
                let (stdin, env) = text.split_once('\n').unwrap();
                let mut parts = name.splitn(3, '-').skip(1);
                Logged {
                    plugin: parts.next().unwrap().to_owned(),
                    command: parts.next().unwrap().to_owned(),
                    stdin: serde_json::from_str(stdin).unwrap(),
                    env: env.lines().map(str::to_owned).collect(),
                }
            })
            .collect()
    }
}

fn result(ip: &str) -> String {
    json!({
        "cniVersion": "1.0.0",
        "interfaces": [{"name": "eth0", "sandbox": "/proc/self/ns/net"}],
        "ips": [{"address": format!("{ip}/24"), "interface": 0}],
    })
    .to_string()
}

fn list(plugins: Value) -> Value {
    json!({"cniVersion": "1.0.0", "name": "fake", "plugins": plugins})
}

fn attachment(id: &str) -> Attachment {
    Attachment {
        id: id.to_owned(),
        netns: PathBuf::from("/proc/self/ns/net"),
        interface: "eth0".to_owned(),
        pod_namespace: "default".to_owned(),
        pod_name: "web".to_owned(),
        pod_uid: id.to_owned(),
        ports: vec![PortMapping {
            host_port: 8080,
            container_port: 80,
            protocol: Protocol::Tcp,
            host_ip: None,
        }],
    }
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

#[tokio::test]
async fn add_chains_the_plugins_and_del_replays_the_cache_in_reverse() {
    let fake = Fake::new(&["first", "second"]);
    let file = fake.conf(
        "10-fake.conflist",
        &list(json!([
            {"type": "first"},
            {"type": "second", "capabilities": {"portMappings": true}},
        ])),
    );
    fake.output("first", "ADD", &result("10.9.0.5"), 0);
    fake.output("second", "ADD", &result("10.9.0.7"), 0);

    let network = fake.cni.add(&attachment("pod-1")).await.unwrap();
    assert_eq!(network.ips, [ip("10.9.0.7")], "the last plugin's result counts");
    assert_eq!(fake.cni.attached().unwrap(), ["pod-1"]);
    assert_eq!(fake.cni.network("pod-1").unwrap(), Some(network));

    let log = fake.log();
    let calls: Vec<_> = log.iter().map(|l| (l.plugin.as_str(), l.command.as_str())).collect();
    assert_eq!(calls, [("first", "ADD"), ("second", "ADD")], "lo is up already: no loopback");
    assert_eq!(log[0].stdin, json!({"type": "first", "name": "fake", "cniVersion": "1.0.0"}));
    let first_result: Value = serde_json::from_str(&result("10.9.0.5")).unwrap();
    assert_eq!(log[1].stdin["prevResult"], first_result);
    assert_eq!(log[1].stdin["runtimeConfig"]["portMappings"][0]["hostPort"], 8080);
    let bin = fake.path("bin");
    let cni_path = format!("CNI_PATH={}:{}", fake.path("missing-bin").display(), bin.display());
    assert_eq!(
        log[0].env,
        [
            "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;\
             K8S_POD_INFRA_CONTAINER_ID=pod-1;K8S_POD_UID=pod-1"
                .to_owned(),
            "CNI_COMMAND=ADD".to_owned(),
            "CNI_CONTAINERID=pod-1".to_owned(),
            "CNI_IFNAME=eth0".to_owned(),
            "CNI_NETNS=/proc/self/ns/net".to_owned(),
            cni_path,
        ]
    );

    // DEL uses the cache, not the conf dir: the config is gone by now.
    fs::remove_file(&file).unwrap();
    fake.cni.del("pod-1").await.unwrap();
    let log = fake.log();
    let calls: Vec<_> = log[2..].iter().map(|l| (l.plugin.as_str(), l.command.as_str())).collect();
    assert_eq!(calls, [("second", "DEL"), ("first", "DEL")]);
    let final_result: Value = serde_json::from_str(&result("10.9.0.7")).unwrap();
    assert_eq!(log[2].stdin["prevResult"], final_result);
    assert_eq!(log[3].stdin["prevResult"], final_result);
    assert!(log[3].env.contains(&"CNI_NETNS=/proc/self/ns/net".to_owned()));
    assert_eq!(fake.cni.attached().unwrap(), Vec::<String>::new());
    assert_eq!(fake.cni.network("pod-1").unwrap(), None);
}

#[tokio::test]
async fn del_of_a_gone_netns_passes_an_empty_one_and_0_3_gets_no_prev_result() {
    let fake = Fake::new(&["only"]);
    fake.conf("a.conf", &json!({"cniVersion": "0.3.1", "name": "old", "type": "only"}));
    fake.output("only", "ADD", &result("10.9.0.8"), 0);
    let mut pod = attachment("pod-2");
    pod.netns = fake.path("gone-netns");
    fake.cni.add(&pod).await.unwrap();
    fake.cni.del("pod-2").await.unwrap();
    let del = fake.log().pop().unwrap();
    assert_eq!((del.plugin.as_str(), del.command.as_str()), ("only", "DEL"));
    assert!(del.env.contains(&"CNI_NETNS=".to_owned()), "{:?}", del.env);
    assert_eq!(del.stdin.get("prevResult"), None);
    assert_eq!(del.stdin["cniVersion"], "0.3.1");
}

#[tokio::test]
async fn a_failing_plugin_is_named_and_what_ran_before_it_is_deleted() {
    let fake = Fake::new(&["first", "second"]);
    let file = fake.conf("10-fake.conflist", &list(json!([{"type": "first"}, {"type": "second"}])));
    fake.output("first", "ADD", &result("10.9.0.5"), 0);
    fake.output("second", "ADD", r#"{"code": 7, "msg": "boom", "details": "no space"}"#, 1);
    let error = fake.cni.add(&attachment("pod-3")).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "CNI plugin second (from {}) failed ADD for pod default/web: boom: no space \
             (CNI error code 7)",
            file.display()
        )
    );
    let calls: Vec<_> =
        fake.log().into_iter().map(|l| format!("{}-{}", l.plugin, l.command)).collect();
    assert_eq!(calls, ["first-ADD", "second-ADD", "second-DEL", "first-DEL"]);
    assert_eq!(fake.cni.attached().unwrap(), Vec::<String>::new());
}

#[tokio::test]
async fn a_crash_without_error_document_shows_stderr() {
    let fake = Fake::new(&["first"]);
    let file = fake.conf("10.conflist", &list(json!([{"type": "first"}])));
    fake.output("first", "ADD", "", 2);
    let error = fake.cni.add(&attachment("pod-4")).await.unwrap_err();
    let text = error.to_string();
    assert!(text.starts_with(&format!("CNI plugin first (from {}) failed ADD", file.display())));
    assert!(text.contains("exit status: 2"), "{text}");
}

#[tokio::test]
async fn an_unusable_result_is_an_error() {
    let fake = Fake::new(&["first"]);
    fake.conf("10.conflist", &list(json!([{"type": "first"}])));
    fake.output("first", "ADD", "not json", 0);
    let error = fake.cni.add(&attachment("pod-5")).await.unwrap_err();
    assert!(matches!(error, Error::PluginResult { .. }), "{error:?}");
    fake.output("first", "ADD", &json!({"cniVersion": "1.0.0", "ips": []}).to_string(), 0);
    let error = fake.cni.add(&attachment("pod-5")).await.unwrap_err();
    assert!(matches!(error, Error::NoIp { .. }), "{error:?}");
    assert_eq!(fake.cni.attached().unwrap(), Vec::<String>::new());
}

#[tokio::test]
async fn adding_again_deletes_the_previous_attachment_first() {
    let fake = Fake::new(&["first"]);
    fake.conf("10.conflist", &list(json!([{"type": "first"}])));
    fake.output("first", "ADD", &result("10.9.0.5"), 0);
    fake.cni.add(&attachment("pod-6")).await.unwrap();
    fake.cni.add(&attachment("pod-6")).await.unwrap();
    let calls: Vec<_> =
        fake.log().into_iter().map(|l| format!("{}-{}", l.plugin, l.command)).collect();
    assert_eq!(calls, ["first-ADD", "first-DEL", "first-ADD"]);
}

#[tokio::test]
async fn a_missing_plugin_names_the_file_and_the_bin_dirs_and_only_what_ran_is_deleted() {
    let fake = Fake::new(&["first"]);
    let file = fake.conf("10.conflist", &list(json!([{"type": "first"}, {"type": "nothere"}])));
    fake.output("first", "ADD", &result("10.9.0.5"), 0);
    let error = fake.cni.add(&attachment("pod-7")).await.unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, Error::PluginMissing { .. }), "{error:?}");
    assert!(text.contains("CNI plugin nothere"), "{text}");
    assert!(text.contains(&file.display().to_string()), "{text}");
    assert!(text.contains(&fake.path("bin").display().to_string()), "{text}");
    let calls: Vec<_> =
        fake.log().into_iter().map(|l| format!("{}-{}", l.plugin, l.command)).collect();
    assert_eq!(calls, ["first-ADD", "first-DEL"]);
    assert_eq!(fake.cni.attached().unwrap(), Vec::<String>::new());
}

#[tokio::test]
async fn no_config_and_a_broken_config_are_clear_errors() {
    let fake = Fake::new(&["first"]);
    let error = fake.cni.add(&attachment("pod-8")).await.unwrap_err();
    assert!(matches!(error, Error::NoConfig { .. }), "{error:?}");
    assert!(error.to_string().contains(&fake.path("net.d").display().to_string()));
    let file = fake.path("net.d").join("10.conflist");
    fs::write(&file, "{ not json").unwrap();
    let error = fake.cni.add(&attachment("pod-8")).await.unwrap_err();
    let text = outpost_core::error_chain::describe(&error);
    assert!(text.contains(&format!("CNI config {} is not valid JSON", file.display())), "{text}");
    assert_eq!(fake.log().len(), 0, "no plugin ran");
}

#[tokio::test]
async fn deleting_an_unknown_id_is_fine_and_bad_ids_are_refused() {
    let fake = Fake::new(&[]);
    fake.cni.del("never-added").await.unwrap();
    let error = fake.cni.del("../etc").await.unwrap_err();
    assert!(matches!(error, Error::Attachment { .. }), "{error:?}");
    let error = fake.cni.add(&attachment("a/b")).await.unwrap_err();
    assert!(matches!(error, Error::Attachment { .. }), "{error:?}");
}

#[test]
fn the_default_config_is_written_once_and_an_existing_one_kept() {
    let fake = Fake::new(&[]);
    let written = fake.cni.ensure_default_config().unwrap().unwrap();
    assert_eq!(written, fake.path("net.d").join(conf::DEFAULT_FILE));
    let bytes = fs::read(&written).unwrap();
    let list = NetworkList::parse(&written, &bytes).unwrap();
    assert_eq!(list.plugins[0].conf["ipam"]["dataDir"], json!(fake.path("cache/ipam")));
    assert_eq!(fake.cni.ensure_default_config().unwrap(), None);
    assert_eq!(fs::read(&written).unwrap(), bytes);

    let other = Fake::new(&[]);
    let mine =
        other.conf("05-mine.conf", &json!({"cniVersion": "1.0.0", "name": "m", "type": "x"}));
    assert_eq!(other.cni.ensure_default_config().unwrap(), None);
    let names: Vec<_> =
        fs::read_dir(other.path("net.d")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(names, [mine]);
    assert!(Path::new(&other.path("net.d")).is_dir());
}
