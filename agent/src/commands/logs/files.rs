//! `outpost logs` while the agent is down: a container's logs straight from its CRI log
//! files, the run chosen from the files there are; the reading is
//! [`crate::runtime::logs::read`]'s, shared with the local API's `/containerLogs`.

use std::io::Write;

use crate::cli::LogsArgs;
use crate::runtime::logs::locate;
use crate::runtime::logs::read::{ContainerLog, Options};
pub use crate::runtime::logs::read::{Error, Result};

/// Prints the logs `args` ask for to `out`; with `--follow`, returns only when the
/// container's log directory goes away.
pub fn print_logs(args: &LogsArgs, out: &mut impl Write) -> Result<()> {
    let (namespace, name) = args.pod.split_once('/').unwrap_or(("default", &args.pod));
    let pod = format!("{namespace}/{name}");
    let pod_dir = locate::pod_dir(&args.pod_log_dir, namespace, name)?;
    let dir = locate::container_dir(&pod_dir, &pod, args.container.as_deref())?;
    let options = Options {
        previous: args.previous,
        follow: args.follow,
        tail: args.tail,
        timestamps: args.timestamps,
        ..Options::default()
    };
    ContainerLog::open(&dir, &pod, options)?.copy_to(out, &|| false)
}
