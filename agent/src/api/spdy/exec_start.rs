//! An exec's start for [`Endpoint::Command`](crate::api::streams::Endpoint): the runtime's
//! exec [`Session`] adapted into [`Attached`], for the SPDY `/exec` until the stream
//! handlers own that adaptation.

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::OwnedSemaphorePermit;

use crate::api::streams::{Attached, Ended, Process, Start};
use crate::error_chain::describe;
use crate::runtime::exec::{Execs, Request, Session};

/// Starts `request` in container `container_id` when called; `permit` (a place among
/// the agent's exec sessions) is held as long as the process.
pub fn exec_start(
    execs: Execs,
    container_id: String,
    request: Request,
    permit: OwnedSemaphorePermit,
) -> Start {
    Box::new(move || {
        async move {
            let mut session =
                execs.start(&container_id, &request).await.map_err(|e| describe(&e))?;
            Ok(Attached {
                stdin: session.stdin.take().map(|s| Box::pin(s) as _),
                stdout: session.stdout.take().map(|s| Box::pin(s) as _),
                stderr: session.stderr.take().map(|s| Box::pin(s) as _),
                process: Box::new(ExecProcess { session, _permit: permit }),
            })
        }
        .boxed()
    })
}

/// A started exec; dropped without waiting, the command is killed (the session's drop).
struct ExecProcess {
    session: Session,
    _permit: OwnedSemaphorePermit,
}

impl Process for ExecProcess {
    fn resize(&self, width: u16, height: u16) -> BoxFuture<'_, Result<(), String>> {
        async move { self.session.resize(width, height).await.map_err(|e| describe(&e)) }.boxed()
    }

    fn wait(self: Box<Self>) -> BoxFuture<'static, Ended> {
        let ExecProcess { session, _permit } = *self;
        async move {
            let ended = session.wait().await.map_err(|e| describe(&e));
            drop(_permit);
            ended
        }
        .boxed()
    }
}
