//! The smoke test of an unpacked release: its binaries are of the platform's architecture
//! (ELF `e_machine`) and, run natively or under qemu user-mode emulation, the agent prints
//! its version, validates the example pods, and in a dry run prints one JSON delta line
//! per example pod, and the container logger answers a call without arguments with its
//! usage; `install.sh` installs both from the unpacked directory.

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};

use super::platform::{self, Platform};

/// How long the dry run may take to print every example pod. Generous: qemu is slow to
/// start a binary, and the machine may be busy.
const DRY_RUN_TIMEOUT: Duration = Duration::from_secs(180);

/// Runs the smoke test on the release unpacked at `release` (`.../outpost-<version>`);
/// `scratch` is an empty directory for state and logs.
pub fn run(
    platform: &Platform,
    release: &Path,
    version: &str,
    scratch: &Path,
) -> anyhow::Result<()> {
    let binary = release.join("bin/outpost");
    let logger = release.join("bin/outpost-container-log");
    for binary in [&binary, &logger] {
        let bytes =
            std::fs::read(binary).with_context(|| format!("cannot read {}", binary.display()))?;
        let machine =
            platform::elf_machine(&bytes).with_context(|| binary.display().to_string())?;
        ensure!(
            machine == platform.elf_machine(),
            "{} is for ELF machine {machine}, not {} ({}): the build used the wrong target",
            binary.display(),
            platform.elf_machine(),
            platform.triple
        );
        println!(
            "smoke: {} is an ELF binary for {} (e_machine {machine})",
            binary.display(),
            platform.triple
        );
    }
    let run = |binary: &Path, args: &[&str]| {
        let mut command = if platform.cross {
            let mut command = Command::new(platform.qemu());
            command.arg("-L").arg(platform.cross_sysroot()).arg(binary);
            command
        } else {
            Command::new(binary)
        };
        command.args(args).stdin(Stdio::null());
        command
    };
    let outpost = |args: &[&str]| run(&binary, args);
    if platform.cross {
        let probe = Command::new(platform.qemu()).arg("--version").output();
        ensure!(
            probe.is_ok_and(|out| out.status.success()),
            "cannot run {}; install the Debian package qemu-user-static (cargo xtask deps)",
            platform.qemu()
        );
    }

    let out = output(outpost(&["version"]))?;
    let printed = String::from_utf8_lossy(&out.stdout);
    ensure!(
        printed.trim_end() == format!("outpost {version}"),
        "`outpost version` printed {printed:?}, expected \"outpost {version}\""
    );
    println!("smoke: outpost version: {}", printed.trim_end());

    let manifests = release.join("manifests");
    let manifests_arg = manifests.to_string_lossy();
    let out = output(outpost(&["validate", "--node-name", "smoke", &manifests_arg]))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let Some(pods) = pods_in_summary(&stderr) else {
        bail!("`outpost validate {manifests_arg}` printed no summary line:\n{stderr}");
    };
    ensure!(pods > 0, "`outpost validate` found no pods in {manifests_arg}");
    println!("smoke: outpost validate: {}", stderr.lines().last().unwrap_or_default());

    let state = scratch.join("state");
    let log = scratch.join("dry-run.log");
    let mut command = outpost(&["run", "--dry-run", "--manifest-dir", &manifests_arg]);
    command.args(["--listen", "127.0.0.1:0", "--node-name", "smoke", "--state-dir"]).arg(&state);
    let stderr =
        std::fs::File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
    command.stdout(Stdio::piped()).stderr(stderr);
    let shown = crate::show(&command);
    let mut child = command.spawn().with_context(|| format!("cannot run `{shown}`"))?;
    let result = deltas(&mut child, pods);
    // The dry run never ends by itself.
    let _ = child.kill();
    let _ = child.wait();
    let lines = result.with_context(|| {
        let agent_log = std::fs::read_to_string(&log).unwrap_or_default();
        format!("`{shown}` did not print one delta per example pod; its log:\n{agent_log}")
    })?;
    for line in &lines {
        println!("smoke: dry run: {line}");
    }

    // Run by hand, without the shim's fds or a path, the logger says how it is run.
    let mut logger = run(&logger, &[]);
    let shown = crate::show(&logger);
    let out = logger.output().with_context(|| format!("cannot run `{shown}`"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.code() == Some(2) && stderr.contains("usage: outpost-container-log"),
        "`{shown}` ({}) did not print its usage:\n{stderr}",
        out.status
    );
    println!(
        "smoke: outpost-container-log without arguments: {}",
        stderr.lines().next().unwrap_or_default()
    );

    install(release, scratch)?;
    println!("smoke: passed");
    Ok(())
}

/// Runs a command to completion; an error (with its output) unless it succeeds.
fn output(mut command: Command) -> anyhow::Result<std::process::Output> {
    let shown = crate::show(&command);
    let out = command.output().with_context(|| format!("cannot run `{shown}`"))?;
    ensure!(
        out.status.success(),
        "`{shown}` failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(out)
}

/// The dry run's first delta lines, until there is one ADD per pod (`pods` of them).
fn deltas(child: &mut Child, pods: usize) -> anyhow::Result<Vec<String>> {
    let Some(stdout) = child.stdout.take() else { bail!("the dry run's stdout is not piped") };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + DRY_RUN_TIMEOUT;
    let mut lines = Vec::new();
    let mut pod_names = Vec::new();
    while pod_names.len() < pods {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = match rx.recv_timeout(left) {
            Ok(line) => line.context("cannot read the dry run's output")?,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                bail!("{} of {pods} pods after {DRY_RUN_TIMEOUT:?}", pod_names.len())
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = child.wait().context("waiting for the dry run")?;
                bail!("the dry run exited ({status}) after {} of {pods} pods", pod_names.len())
            }
        };
        let pod = added_pod(&line)?;
        ensure!(!pod_names.contains(&pod), "a second delta for {pod}: {line}");
        pod_names.push(pod);
        lines.push(line);
    }
    Ok(lines)
}

/// The `namespace/name` of a dry-run delta line, which must be an ADD.
fn added_pod(line: &str) -> anyhow::Result<String> {
    let delta: serde_json::Value =
        serde_json::from_str(line).with_context(|| format!("not a JSON delta line: {line:?}"))?;
    let field = |name: &str| delta.get(name).and_then(|v| v.as_str()).unwrap_or_default();
    ensure!(field("op") == "ADD", "expected an ADD delta for an example pod, got {line}");
    ensure!(!field("name").is_empty() && !field("uid").is_empty(), "a delta without a pod: {line}");
    Ok(format!("{}/{}", field("namespace"), field("name")))
}

/// The pod count of `outpost validate`'s summary line, `N file(s), M pod(s), K invalid`.
fn pods_in_summary(stderr: &str) -> Option<usize> {
    stderr.lines().rev().find_map(|line| {
        let (_, rest) = line.split_once(" file(s), ")?;
        let (pods, _) = rest.split_once(" pod(s), ")?;
        pods.parse().ok()
    })
}

/// `install.sh --root` from the unpacked release (no `--binary`: it finds `bin/outpost`
/// beside itself) installs that binary and the container logger beside it.
fn install(release: &Path, scratch: &Path) -> anyhow::Result<()> {
    let root = scratch.join("root");
    std::fs::create_dir(&root).with_context(|| format!("cannot create {}", root.display()))?;
    let mut command = Command::new("sh");
    command.arg(release.join("install.sh")).arg("--root").arg(&root);
    output(command)?;
    for name in ["outpost", "outpost-container-log"] {
        let installed = root.join("usr/local/bin").join(name);
        let shipped = release.join("bin").join(name);
        let same = std::fs::read(&installed).ok() == std::fs::read(&shipped).ok();
        ensure!(
            same,
            "install.sh did not install the release's bin/{name} as {}",
            installed.display()
        );
    }
    println!(
        "smoke: install.sh --root {}: installed bin/outpost and bin/outpost-container-log",
        root.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_line_gives_the_pod_count() {
        let stderr = "some log line\n2 file(s), 3 pod(s), 0 invalid\n";
        assert_eq!(pods_in_summary(stderr), Some(3));
        assert_eq!(pods_in_summary("0 file(s), 0 pod(s), 0 invalid"), Some(0));
        assert_eq!(pods_in_summary("error: no such directory\n"), None);
    }

    #[test]
    fn added_pod_names_the_pod_of_an_add_line() {
        let line = r#"{"op":"ADD","source":"file","uid":"u1","namespace":"edge","name":"web-smoke","hash":"h"}"#;
        assert_eq!(added_pod(line).unwrap(), "edge/web-smoke");
        let update = line.replace("ADD", "UPDATE");
        assert!(added_pod(&update).unwrap_err().to_string().contains("expected an ADD"));
        assert!(added_pod("starting...").is_err());
        assert!(added_pod(r#"{"op":"ADD","uid":"u1"}"#).is_err());
    }
}
