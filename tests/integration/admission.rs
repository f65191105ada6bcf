//! End to end: admission (SEMANTICS.md A1) on a running agent. A pod asking for what this
//! host cannot do (AppArmor where the kernel has none) is not run: `/pods` shows it
//! Failed with kubelet's reason and message, with a Warning Event. (A field Outpost does
//! not implement is refused before that, by the file source and `outpost validate`: see
//! `cli::a1_validate_refuses_unsupported_fields_and_warns`.)

use outpost_tests::needs;
use std::time::Duration;

use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::{Node, eventually, pod, wait_pod};
use outpost_tests::workload::{Workload, find_event};

const LONG: Duration = Duration::from_secs(60);

#[needs(pods)]
#[test]
fn a1_a_pod_this_host_cannot_run_is_failed_with_the_reason_and_runs_nothing() {
    if outpost::host::apparmor_enabled() {
        // This host could run it: the refusal is covered by the pod worker's unit tests.
        return;
    }
    let node = Node::new();
    let w = Workload::start(&node);
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: confined
spec:
  containers:
  - name: main
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
    securityContext:
      appArmorProfile:
        type: RuntimeDefault
"#
    );
    node.put("confined.yaml", &yaml);
    let name = "confined-edge-1";
    let p = wait_pod(&w.agent, name, LONG, |p| p["status"]["phase"] == "Failed");
    assert_eq!(p["status"]["reason"], "AppArmor", "{}", p["status"]);
    let message = p["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Cannot enforce AppArmor: AppArmor is not enabled on the host"),
        "{message}"
    );
    let events = w.events("default", name);
    let event = find_event(&events, "AppArmor", "Cannot enforce AppArmor");
    assert!(event.is_some_and(|e| e["type"] == "Warning"), "{events:?}");
    assert!(node.containers().is_empty(), "nothing of it runs");

    node.remove("confined.yaml");
    eventually("the refused pod is gone from /pods", LONG, || pod(&w.agent, name).is_none());
}
