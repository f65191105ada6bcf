//! A real client of the pod resources API (D4): `support/podresources-client.py`, Python's
//! grpcio with stubs generated from the repository's proto when it runs, as monitoring
//! agents are built. Tests using it carry `#[needs(python_grpc)]`.

use std::path::Path;
use std::process::Command;

use crate::prerequisite;

/// Debian's python3, where `cargo xtask deps` installs grpcio and grpc_tools.
const PYTHON: &str = "/usr/bin/python3";

/// Whether Debian's python3 imports grpc and grpc_tools.
pub fn has_python_grpc() -> bool {
    Command::new(PYTHON)
        .args(["-c", "import grpc, grpc_tools"])
        .output()
        .is_ok_and(|out| out.status.success())
}

/// Calls the API on `socket`: `["list"]`, `["allocatable"]` or `["get", NAMESPACE, NAME]`;
/// the answer as JSON with the proto's field names, or `{"error": {"code", "details"}}`.
pub fn client(socket: &Path, call: &[&str]) -> serde_json::Value {
    prerequisite(has_python_grpc(), "python3-grpcio and python3-grpc-tools (cargo xtask deps)");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(PYTHON)
        .arg(root.join("support/podresources-client.py"))
        .arg(root.join("../agent/kubelet-api/proto"))
        .arg(socket)
        .args(call)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the pod resources client: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the pod resources client {call:?}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}
