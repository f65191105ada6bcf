//! `outpost-container-log`: the node logger the agent starts (`node`), or the logger
//! containerd's shim runs for one container (see the library's documentation).

use std::process::ExitCode;

use outpost_container_log::{node, shim};

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1).peekable();
    if args.peek().is_some_and(|first| first == node::SUBCOMMAND) {
        args.next();
        // Out of the agent's session and process group: the node logger outlives the
        // agent (an error only says it leads a session already).
        let _ = nix::unistd::setsid();
        return match node::parse_args(args) {
            Ok(args) => report(node::run(&args)),
            Err(reason) => usage(&reason, node::USAGE),
        };
    }
    match shim::parse_args(args) {
        Ok(args) => match args.run() {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                let cause = error.source().map(|c| format!(": {c}"));
                eprintln!("outpost-container-log: {error}{}", cause.unwrap_or_default());
                ExitCode::FAILURE
            }
        },
        Err(reason) => usage(&reason, shim::USAGE),
    }
}

fn usage(reason: &dyn std::fmt::Display, usage: &str) -> ExitCode {
    eprintln!("outpost-container-log: {reason}\n{usage}");
    ExitCode::from(2)
}

fn report<E: std::error::Error>(result: Result<(), E>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let mut line = error.to_string();
            let mut cause = error.source();
            while let Some(c) = cause {
                line.push_str(&format!(": {c}"));
                cause = c.source();
            }
            eprintln!("outpost-container-log: {line}");
            ExitCode::FAILURE
        }
    }
}
