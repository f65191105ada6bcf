//! `cargo xtask bench [--quick] [--profile P] [--agent-profile P] [ID…]`: runs the benchmark
//! program (`tests/benches/bench.rs`) with the release profile. It prints a table and writes
//! `target/bench/report.json`; a missed target is reported there, only an error (a missed
//! edit, a wrong delta, an IO failure) fails the task. IDs (`b8`) select benchmarks.
//!
//! The program and the `outpost` binary it runs are built by one cargo invocation, so
//! that they share every dependency: the benchmarks' dependencies turn on features the
//! agent's alone do not (serde's `alloc`, kube's `runtime`), and building the agent on
//! its own, as the test support otherwise does, recompiled every crate that depends on
//! them in a second release build. The program is then run directly, told where the
//! agent is (`OUTPOST_TEST_BIN`).
//!
//! `--agent-profile distribution` measures the agent as `cargo xtask dist` ships it (B5's
//! RSS target is the distribution build's): the agent and its logger are then built
//! apart, in that profile, and the program runs them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail, ensure};

/// Tells the test support which `outpost` binary to run (`outpost_tests::BIN_ENV`).
pub(crate) const BIN_ENV: &str = "OUTPOST_TEST_BIN";
/// The profile of the benchmarks and the agent they measure: the figures are the
/// release build's.
const PROFILE: &str = "release";

/// Options of the `bench` task.
#[derive(Debug, Clone)]
pub struct Options {
    /// A smaller sample of each benchmark (a check that finishes in about a minute).
    pub quick: bool,
    /// The benchmarks to run (ID prefixes, `b8`); none: all.
    pub only: Vec<String>,
    /// The cargo profile to build with: `release` for figures; CI checks that the
    /// benchmarks run with the `dev` build the tests already made (their figures are then
    /// not the release's, and the report says so).
    pub profile: String,
    /// The cargo profile of the agent measured, when not the program's.
    pub agent_profile: Option<String>,
}

impl Default for Options {
    fn default() -> Options {
        Options { quick: false, only: Vec::new(), profile: PROFILE.to_owned(), agent_profile: None }
    }
}

impl Options {
    pub fn parse(args: &[String]) -> anyhow::Result<Options> {
        let mut options = Options::default();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--quick" => options.quick = true,
                "--profile" => {
                    options.profile =
                        args.next().context("--profile needs a cargo profile")?.clone();
                }
                "--agent-profile" => {
                    options.agent_profile =
                        Some(args.next().context("--agent-profile needs a cargo profile")?.clone());
                }
                id if is_id(id) => options.only.push(id.to_owned()),
                other => {
                    bail!(
                        "`bench`: unknown argument {other:?}; usage: cargo xtask bench [--quick] [--profile P] [--agent-profile P] [ID…] (ID: b1, B8, o2…)"
                    )
                }
            }
        }
        Ok(options)
    }
}

/// `b8`, `B5`, `o2`: a letter and digits.
fn is_id(arg: &str) -> bool {
    let mut chars = arg.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.clone().next().is_some()
        && chars.all(|c| c.is_ascii_digit())
}

/// Builds and runs the benchmarks with `env` added to their environment (`ci` passes the
/// test containerd's socket and the test images' directory).
pub fn run(options: &Options, env: &[(&str, PathBuf)]) -> anyhow::Result<()> {
    let (program, mut agent) = build_program(&options.profile, "bench")?;
    if let Some(profile) = &options.agent_profile {
        agent = build_agent(profile)?;
        println!("bench: measuring the agent built with profile {profile}: {}", agent.display());
    }
    let mut command = Command::new(&program);
    if options.quick {
        command.arg("--quick");
    }
    command.args(&options.only);
    // Where `cargo bench` would run it: the package's directory.
    command.current_dir(crate::project_root().join("tests"));
    command.env(BIN_ENV, &agent);
    command.envs(env.iter().map(|(k, v)| (k, v.as_os_str())));
    crate::run(command)
}

/// One build, in cargo profile `profile`, of the `outpost-tests` bench target `program`
/// and the agent with its container logger beside it (so that they share every
/// dependency); the paths of the program and the agent.
pub(crate) fn build_program(profile: &str, program: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
    build_program_with(profile, program, &[])
}

/// `cargo build` of the workspace's programs in `profile` (the agent and its container
/// logger among them), with cargo's JSON messages; more targets go after. The whole
/// workspace, not the agent's packages alone: cargo unifies the dependencies' features
/// over the packages it is given, so a build of a few of them compiles much of the tree
/// again (3 min in CI after the tests' build), and the tests' next build undoes it.
fn workspace_build_args(profile: &str) -> Vec<&str> {
    vec![
        "build",
        "--profile",
        profile,
        "--message-format",
        "json-render-diagnostics",
        "--workspace",
        "--bins",
    ]
}

/// The agent and its container logger beside it, built alone in `profile` (a shipped
/// profile's LTO build of every workspace program would take long); the agent's path.
fn build_agent(profile: &str) -> anyhow::Result<PathBuf> {
    let mut args = vec!["build", "--profile", profile, "--message-format"];
    args.extend(["json-render-diagnostics", "-p", "outpost", "-p", "outpost-container-log"]);
    args.extend(["--bin", "outpost", "--bin", "outpost-container-log"]);
    let (messages, shown) = built(crate::cargo(&args))?;
    agent_with_logger(&messages, &shown)
}

/// The agent cargo's `messages` name, checked to have its container logger beside it
/// (else the agent's shims would run another build's logger).
fn agent_with_logger(messages: &str, shown: &str) -> anyhow::Result<PathBuf> {
    let agent = executable(messages, "outpost", "bin")
        .with_context(|| format!("`{shown}` named no outpost binary"))?;
    let logger = executable(messages, "outpost-container-log", "bin");
    ensure!(
        logger.as_deref() == Some(agent.with_file_name("outpost-container-log").as_path()),
        "`{shown}` built no outpost-container-log beside {} (the agent's shims would run another build's logger)",
        agent.display()
    );
    Ok(agent)
}

/// [`build_program`] with more cargo arguments (`--features outpost/dhat-heap`).
pub(crate) fn build_program_with(
    profile: &str,
    program: &str,
    extra: &[&str],
) -> anyhow::Result<(PathBuf, PathBuf)> {
    let mut args = workspace_build_args(profile);
    args.extend(["--bench", program]);
    args.extend_from_slice(extra);
    let (messages, shown) = built(crate::cargo(&args))?;
    let program = executable(&messages, program, "bench")
        .with_context(|| format!("`{shown}` named no {program} program"))?;
    Ok((program, agent_with_logger(&messages, &shown)?))
}

/// Runs `command`, a cargo build with `--message-format json-render-diagnostics` (its
/// diagnostics go to stderr); its JSON messages, and the command as shown.
pub(crate) fn built(mut command: std::process::Command) -> anyhow::Result<(String, String)> {
    command.stdout(Stdio::piped()).stderr(Stdio::inherit());
    let shown = crate::show(&command);
    println!("$ {shown}");
    let out = command.output().with_context(|| format!("cannot run `{shown}`"))?;
    ensure!(out.status.success(), "`{shown}` failed: {}", out.status);
    Ok((String::from_utf8_lossy(&out.stdout).into_owned(), shown))
}

/// The executable of target `name` of `kind` in cargo's JSON messages.
pub(crate) fn executable(messages: &str, name: &str, kind: &str) -> Option<PathBuf> {
    messages.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).find_map(
        |message| {
            let found = message["reason"] == "compiler-artifact"
                && message["target"]["name"] == name
                && message["target"]["kind"].as_array().is_some_and(|k| k.contains(&kind.into()));
            if found {
                message["executable"].as_str().map(Path::new).map(Path::to_path_buf)
            } else {
                None
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_select_benchmarks_and_anything_else_is_refused() {
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let options = Options::parse(&args(&["--quick", "b8", "O2"])).unwrap();
        assert!(options.quick);
        assert_eq!(options.only, ["b8", "O2"]);
        assert_eq!(options.profile, "release");
        let dev = Options::parse(&args(&["--quick", "--profile", "dev"])).unwrap();
        assert_eq!(dev.profile, "dev");
        assert!(Options::parse(&args(&["--profile"])).is_err());
        let shipped = Options::parse(&args(&["--agent-profile", "distribution", "B5"])).unwrap();
        assert_eq!(shipped.agent_profile.as_deref(), Some("distribution"));
        assert_eq!(shipped.profile, "release");
        assert!(Options::parse(&args(&["--agent-profile"])).is_err());
        assert!(Options::parse(&args(&["--slow"])).is_err());
        assert!(Options::parse(&args(&["b"])).is_err());
        assert!(Options::parse(&args(&["bench"])).is_err());
    }

    #[test]
    fn executables_are_found_by_name_and_kind() {
        let messages = r#"{"reason":"compiler-artifact","target":{"name":"outpost","kind":["lib"]},"executable":null}
{"reason":"compiler-artifact","target":{"name":"bench","kind":["bench"]},"executable":"/t/release/deps/bench-1"}
{"reason":"compiler-artifact","target":{"name":"outpost","kind":["bin"]},"executable":"/t/release/outpost"}
{"reason":"build-finished","success":true}"#;
        assert_eq!(
            executable(messages, "bench", "bench"),
            Some(PathBuf::from("/t/release/deps/bench-1"))
        );
        assert_eq!(
            executable(messages, "outpost", "bin"),
            Some(PathBuf::from("/t/release/outpost"))
        );
        assert_eq!(executable(messages, "outpost", "bench"), None);
    }
}
