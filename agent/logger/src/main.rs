//! `outpost-container-log`: the logger containerd's shim runs for one of Outpost's
//! containers (see the library's documentation).

use std::process::ExitCode;

use outpost_container_log::shim;

fn main() -> ExitCode {
    let args = match shim::parse_args(std::env::args_os().skip(1)) {
        Ok(args) => args,
        Err(reason) => {
            eprintln!("outpost-container-log: {reason}\n{}", shim::USAGE);
            return ExitCode::from(2);
        }
    };
    match args.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let cause = error.source().map(|c| format!(": {c}"));
            eprintln!("outpost-container-log: {error}{}", cause.unwrap_or_default());
            ExitCode::FAILURE
        }
    }
}
