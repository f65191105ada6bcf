//! An exec's command as the transports take it: [`crate::runtime::exec::Session`]'s
//! streams as an [`Attached`], the session itself as its [`Process`]. Dropped without
//! [`Process::wait`], the session kills and removes the command (as containerd's CRI does
//! when an exec stream ends).

use futures::FutureExt;
use futures::future::BoxFuture;

use crate::api::streams::{Attached, Ended, Error, Input, Output, Process, Start, StreamOptions};
use crate::runtime::exec::{Execs, Request, Session};

/// What starts `command` in container `id` with the streams of `options`.
pub(super) fn start(
    execs: Execs,
    id: String,
    command: Vec<String>,
    options: StreamOptions,
) -> Start {
    Box::new(move || {
        async move {
            let request = Request {
                command,
                stdin: options.stdin,
                stdout: options.stdout,
                stderr: options.stderr,
                tty: options.tty,
            };
            let session = execs.start(&id, &request).await?;
            Ok(attached(session))
        }
        .boxed()
    })
}

/// The session's streams, and the session as their process.
fn attached(mut session: Session) -> Attached {
    let stdin = session.stdin.take().map(|pipe| Box::pin(pipe) as Input);
    let stdout = session.stdout.take().map(|pipe| Box::pin(pipe) as Output);
    let stderr = session.stderr.take().map(|pipe| Box::pin(pipe) as Output);
    Attached { stdin, stdout, stderr, process: Box::new(Command(session)) }
}

/// A started exec command.
struct Command(Session);

impl Process for Command {
    fn resize(&self, width: u16, height: u16) -> BoxFuture<'_, Result<(), Error>> {
        async move { Ok(self.0.resize(width, height).await?) }.boxed()
    }

    fn wait(self: Box<Self>) -> BoxFuture<'static, Ended> {
        async move { Ok(self.0.wait().await?) }.boxed()
    }
}
