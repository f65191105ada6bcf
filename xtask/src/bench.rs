//! `cargo xtask bench [--quick]`: runs the benchmark program (`tests/benches/bench.rs`)
//! with the release profile. It prints a table and writes `target/bench/report.json`; a
//! missed target is reported there, only an error (a missed edit, a wrong delta, an IO
//! failure) fails the task.

use anyhow::bail;

/// Options of the `bench` task.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// A smaller sample of each benchmark (a check that finishes in about a minute).
    pub quick: bool,
}

impl Options {
    pub fn parse(args: &[String]) -> anyhow::Result<Options> {
        let mut options = Options::default();
        for arg in args {
            match arg.as_str() {
                "--quick" => options.quick = true,
                other => {
                    bail!("`bench`: unknown argument {other:?}; usage: cargo xtask bench [--quick]")
                }
            }
        }
        Ok(options)
    }
}

/// Runs the benchmarks with `env` added to their environment (`ci` passes the test
/// containerd's socket and the test images' directory).
pub fn run(options: &Options, env: &[(&str, std::path::PathBuf)]) -> anyhow::Result<()> {
    let mut args = vec!["bench", "-p", "outpost-tests", "--bench", "bench", "--"];
    if options.quick {
        args.push("--quick");
    }
    let mut command = crate::cargo(&args);
    command.envs(env.iter().map(|(k, v)| (k, v.as_os_str())));
    crate::run(command)
}
