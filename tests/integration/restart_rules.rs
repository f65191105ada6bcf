//! End to end: a container's own `restartPolicy` and `restartPolicyRules` (I4, KEP-5307)
//! on the real containerd and runc: restarts by exit code in a `Never` pod, and a
//! container's `OnFailure` in an `Always` pod; what kube-apiserver refuses of them,
//! refused in its words by `outpost validate` (A1).

use outpost_tests::needs;
use std::fs;
use std::process::Command;
use std::time::Duration;

use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::{Node, wait_pod};
use outpost_tests::workload::{delete_and_wait, is_running, pretty, restarts, status_of};
use outpost_tests::{outpost_bin, pod_yaml};

const LONG: Duration = Duration::from_secs(90);

/// A script that counts its runs in `/state/NAME` and exits with the code `codes` gives
/// for that run (the last one for every later run).
fn exits(name: &str, codes: &[i32]) -> String {
    let cases: Vec<String> =
        codes.iter().enumerate().map(|(i, code)| format!("{}) exit {code};;", i + 1)).collect();
    let last = codes.last().copied().unwrap_or(0);
    format!(
        "n=$(( $(cat /state/{name} 2>/dev/null || echo 0) + 1 )); echo $n > /state/{name}; \
         case $n in {} *) exit {last};; esac",
        cases.join(" ")
    )
}

/// I4: in a pod with `restartPolicy: Never`, a container with its own `Never` and a rule
/// restarting it on exit code 42 is restarted after each 42 (its restartCount grows) and
/// not after its exit 1; its sibling with the same rule exits 0 and is not restarted.
/// The pod then fails, as kubelet's phase says once no container would restart.
#[needs(pods)]
#[test]
fn i4_a_restart_rule_restarts_a_container_of_a_never_pod_on_exit_code_42() {
    let node = Node::new();
    let agent = node.start();
    let rule = "restartPolicy: Never
    restartPolicyRules:
    - action: Restart
      exitCodes:
        operator: In
        values: [42]";
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: trainer
spec:
  restartPolicy: Never
  volumes:
  - name: state
    emptyDir: {{}}
  containers:
  - name: worker
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: Never
    command: [sh, -c, '{worker}']
    {rule}
    volumeMounts:
    - name: state
      mountPath: /state
  - name: done
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: Never
    command: [sh, -c, '{done}']
    {rule}
    volumeMounts:
    - name: state
      mountPath: /state
"#,
        worker = exits("worker", &[42, 42, 1]),
        done = exits("done", &[0]),
    );
    node.put("trainer.yaml", &yaml);
    let pod = wait_pod(&agent, "trainer-edge-1", LONG, |p| {
        matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
    });
    let worker = status_of(&pod, "worker");
    assert_eq!(pod["status"]["phase"], "Failed", "{}", pretty(&pod));
    assert_eq!(worker["state"]["terminated"]["exitCode"], 1, "{}", pretty(&pod));
    assert_eq!(worker["lastState"]["terminated"]["exitCode"], 42, "{}", pretty(&pod));
    assert_eq!(restarts(worker), 2, "restarted after each exit 42: {}", pretty(&pod));
    let done = status_of(&pod, "done");
    assert_eq!(done["state"]["terminated"]["exitCode"], 0, "{}", pretty(&pod));
    assert_eq!(restarts(done), 0, "{}", pretty(&pod));
    delete_and_wait(&node, &agent, &[("trainer.yaml", "trainer-edge-1")]);
}

/// I4: in a pod with the default `restartPolicy: Always`, a container with its own
/// `OnFailure` is restarted after its failure and stays terminated after its success,
/// while the pod runs on with its server.
#[needs(pods)]
#[test]
fn i4_a_container_on_failure_in_an_always_pod_stops_after_its_success() {
    let node = Node::new();
    let agent = node.start();
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: migrate
spec:
  volumes:
  - name: state
    emptyDir: {{}}
  containers:
  - name: server
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: Never
    command: [sh, -c, 'trap "exit 0" TERM; while true; do sleep 1; done']
  - name: migration
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: Never
    command: [sh, -c, '{migration}']
    restartPolicy: OnFailure
    volumeMounts:
    - name: state
      mountPath: /state
"#,
        migration = exits("migration", &[3, 0]),
    );
    node.put("migrate.yaml", &yaml);
    let pod = wait_pod(&agent, "migrate-edge-1", LONG, |p| {
        status_of(p, "migration")["state"]["terminated"]["exitCode"] == 0
    });
    let migration = status_of(&pod, "migration");
    assert_eq!(restarts(migration), 1, "restarted after its exit 3: {}", pretty(&pod));
    assert_eq!(migration["lastState"]["terminated"]["exitCode"], 3, "{}", pretty(&pod));
    assert!(is_running(status_of(&pod, "server")), "{}", pretty(&pod));
    assert_eq!(pod["status"]["phase"], "Running", "{}", pretty(&pod));
    delete_and_wait(&node, &agent, &[("migrate.yaml", "migrate-edge-1")]);
}

/// A1, I4: rules without the container's own `restartPolicy` are refused as
/// kube-apiserver refuses them, naming the field, before anything runs.
#[test]
fn a1_i4_validate_refuses_rules_without_the_containers_own_policy() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.yaml");
    let rules =
        "    restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [42]}}]\n";
    let yaml = pod_yaml("web", BUSYBOX_IMAGE)
        .replace("  - name: main\n", &format!("  - name: main\n{rules}"));
    fs::write(&file, yaml).unwrap();
    let validate = || {
        let mut command = Command::new(outpost_bin());
        command.args(["validate", "--node-name", "n1"]).arg(&file);
        command.output().unwrap()
    };
    let out = validate();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(
            "spec.containers[0].restartPolicy: Required value: must specify restartPolicy when \
             restart rules are used"
        ),
        "{stdout}"
    );
    // With the container's own policy, the same rules are valid.
    let with_policy = fs::read_to_string(&file)
        .unwrap()
        .replace(rules, &format!("    restartPolicy: Never\n{rules}"));
    fs::write(&file, with_policy).unwrap();
    let out = validate();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}
