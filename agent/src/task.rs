//! The agent's long-running tasks: each named, spawned in one list, and stopped in that
//! list's order (linkerd's shape: every component's `Config::build` returns its handle
//! and its task; the root, `commands::run`, only wires, spawns and supervises them).

use std::time::Duration;

use futures::future::BoxFuture;
use tokio::task::{AbortHandle, JoinHandle};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, error, info, info_span, warn};

use crate::error_chain::describe;

/// How a task ended badly.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The task's own error, as its component made it.
    #[error(transparent)]
    Failed(Box<dyn std::error::Error + Send + Sync>),
    #[error("the agent's {task} task panicked")]
    Panicked {
        task: &'static str,
        #[source]
        source: tokio::task::JoinError,
    },
}

/// How a task is stopped when the agent shuts down.
#[derive(Debug, Clone)]
pub enum Stop {
    /// Dropped where it is: it holds nothing that must be finished.
    Abort,
    /// Given up to this long to end by itself (the tasks before it in the list are
    /// stopped, so its inputs are closed), then aborted.
    Drain(Duration),
    /// Told to stop (the token), then given up to this long to end.
    Cancel(CancellationToken, Duration),
}

/// What a task's end means for the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Its end, with its result, is the agent's (the pod workers, a dry run's printer).
    Main,
    /// Its end is logged and the agent goes on without it, unless it failed: a task's
    /// failure is always the agent's.
    Helper,
}

/// A named long-running part of the agent, not yet spawned.
pub struct Task {
    pub name: &'static str,
    pub role: Role,
    pub stop: Stop,
    future: BoxFuture<'static, Result<(), Error>>,
}

impl Task {
    pub fn new<E>(
        name: &'static str,
        future: impl Future<Output = Result<(), E>> + Send + 'static,
    ) -> Task
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let future = async move { future.await.map_err(|e| Error::Failed(Box::new(e))) };
        Task { name, role: Role::Helper, stop: Stop::Abort, future: Box::pin(future) }
    }

    /// A task whose end has no result of its own.
    pub fn infallible(
        name: &'static str,
        future: impl Future<Output = ()> + Send + 'static,
    ) -> Task {
        let future = async move {
            future.await;
            Ok(())
        };
        Task { name, role: Role::Helper, stop: Stop::Abort, future: Box::pin(future) }
    }

    pub fn main(mut self) -> Task {
        self.role = Role::Main;
        self
    }

    pub fn stop(mut self, stop: Stop) -> Task {
        self.stop = stop;
        self
    }
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("name", &self.name)
            .field("role", &self.role)
            .field("stop", &self.stop)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct Running {
    name: &'static str,
    role: Role,
    stop: Stop,
    handle: Option<JoinHandle<Result<(), Error>>>,
}

/// The spawned tasks, in their shutdown order.
#[derive(Debug)]
pub struct Tasks {
    running: Vec<Running>,
}

impl Tasks {
    /// Spawns every task, each in a span named after it.
    pub fn spawn(tasks: Vec<Task>) -> Tasks {
        let running = tasks
            .into_iter()
            .map(|task| {
                let span = info_span!("task", task = task.name);
                Running {
                    name: task.name,
                    role: task.role,
                    stop: task.stop,
                    handle: Some(tokio::spawn(task.future.instrument(span))),
                }
            })
            .collect();
        Tasks { running }
    }

    /// The main tasks, by name, while they run (systemd's watchdog is fed while none ended).
    pub fn main_tasks(&self) -> Vec<(&'static str, AbortHandle)> {
        self.running
            .iter()
            .filter(|task| task.role == Role::Main)
            .filter_map(|task| Some((task.name, task.handle.as_ref()?.abort_handle())))
            .collect()
    }

    /// Adds a task that is stopped before all the others (the watchdog's feeder).
    pub fn spawn_first(&mut self, task: Task) {
        let mut spawned = Tasks::spawn(vec![task]);
        self.running.splice(0..0, spawned.running.drain(..));
    }

    /// Waits until a main task ends or any task fails, and returns its result. Helpers
    /// that end well are logged and forgotten. With nothing left to wait for, waits
    /// forever.
    pub async fn main_ended(&mut self) -> Result<(), Error> {
        loop {
            let waiting: Vec<(usize, &mut JoinHandle<Result<(), Error>>)> = self
                .running
                .iter_mut()
                .enumerate()
                .filter_map(|(i, task)| Some((i, task.handle.as_mut()?)))
                .collect();
            if waiting.is_empty() {
                return std::future::pending().await;
            }
            let (indices, handles): (Vec<usize>, Vec<_>) = waiting.into_iter().unzip();
            let (ended, which, _) = futures::future::select_all(handles).await;
            let task = &mut self.running[indices[which]];
            task.handle = None;
            let result = ended
                .map_err(|source| Error::Panicked { task: task.name, source })
                .and_then(|result| result);
            match (task.role, result) {
                (Role::Helper, Ok(())) => info!(task = task.name, "task done"),
                (Role::Main, Ok(())) => return Ok(()),
                (_, Err(e)) => {
                    error!(task = task.name, error = %describe(&e), "task failed");
                    return Err(e);
                }
            }
        }
    }

    /// Waits for the named task to end by itself, and returns its result (a node
    /// shutdown's pods stopped first).
    pub async fn join(&mut self, name: &str) -> Result<(), Error> {
        let Some(task) = self.running.iter_mut().find(|task| task.name == name) else {
            return Ok(());
        };
        match task.handle.take() {
            Some(handle) => handle
                .await
                .map_err(|source| Error::Panicked { task: task.name, source })
                .and_then(|result| result),
            None => Ok(()),
        }
    }

    /// Stops every task still running, one after the other in the list's order.
    pub async fn stop(self) {
        for task in self.running {
            let Some(mut handle) = task.handle else { continue };
            let limit = match task.stop {
                Stop::Abort => {
                    handle.abort();
                    continue;
                }
                Stop::Drain(limit) => limit,
                Stop::Cancel(token, limit) => {
                    token.cancel();
                    limit
                }
            };
            match tokio::time::timeout(limit, &mut handle).await {
                Ok(Ok(Err(e))) => {
                    warn!(task = task.name, error = %describe(&e), "task failed while stopping")
                }
                Ok(_) => {}
                Err(_) => {
                    warn!(task = task.name, ?limit, "task did not finish its work in time");
                    handle.abort();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
