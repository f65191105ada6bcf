//! containerd's event stream, narrowed to what pod workers act on: a task exited, a task
//! was OOM-killed. Exits come from here, never from polling; after the stream breaks and
//! is subscribed again, one [`TaskEvent::Resync`] tells the workers to look at their
//! tasks once, because exits may have happened while nobody listened.

use std::time::Duration;

use containerd_client::events::{TaskExit, TaskOom};
use containerd_client::services::v1::SubscribeRequest;
use futures::StreamExt as _;
use outpost_core::backoff::Backoff;
use outpost_core::error_chain::describe;
use prost::Message as _;

use super::Containerd;

const TOPIC_EXIT: &str = "/tasks/exit";
const TOPIC_OOM: &str = "/tasks/oom";

/// What the runtime reports about tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskEvent {
    /// A task's init process exited (exec'd processes are filtered out).
    Exit { container_id: String, exit_status: u32, exited_at: Option<jiff::Timestamp> },
    /// The kernel's OOM killer acted in the container's cgroup.
    Oom { container_id: String },
    /// The stream was (re)subscribed after a gap: events may have been missed.
    Resync,
}

impl TaskEvent {
    pub fn container_id(&self) -> Option<&str> {
        match self {
            TaskEvent::Exit { container_id, .. } | TaskEvent::Oom { container_id } => {
                Some(container_id)
            }
            TaskEvent::Resync => None,
        }
    }
}

/// Subscribes and hands each event to `deliver` as it arrives, until `deliver` returns
/// false (nobody listens any more) or the task is aborted; resubscribes with backoff
/// when the stream breaks (containerd restarting), delivering `Resync` after every
/// subscription but the first.
///
/// containerd answers a Subscribe call only with its first event, so the call itself
/// cannot say when the subscription stands. It counts as standing once containerd
/// answers a Version call sent after it on the same connection.
pub async fn watch(containerd: Containerd, mut deliver: impl FnMut(TaskEvent) -> bool) {
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(10));
    let mut first = true;
    let mut last_failure: Option<String> = None;
    loop {
        let namespace = containerd.namespace();
        let filters = [TOPIC_EXIT, TOPIC_OOM]
            .iter()
            .map(|topic| format!("namespace=={namespace},topic==\"{topic}\""))
            .collect();
        let mut client = containerd.events();
        let subscribe = client.subscribe(SubscribeRequest { filters });
        tokio::pin!(subscribe);
        let mut standing = false;
        let response = loop {
            tokio::select! {
                response = &mut subscribe => break response,
                answered = answers(&containerd), if !standing => {
                    if answered {
                        standing = true;
                        if !subscribed(&mut deliver, &mut first, &mut last_failure, &mut backoff) {
                            return;
                        }
                    }
                }
            }
        };
        match response {
            Ok(response) => {
                if !standing
                    && !subscribed(&mut deliver, &mut first, &mut last_failure, &mut backoff)
                {
                    return;
                }
                let mut stream = response.into_inner();
                while let Some(envelope) = stream.next().await {
                    let envelope = match envelope {
                        Ok(envelope) => envelope,
                        Err(status) => {
                            tracing::warn!(error = %status, "containerd event stream broke");
                            break;
                        }
                    };
                    let Some(event) = decode(&envelope.topic, envelope.event.as_ref()) else {
                        continue;
                    };
                    if !deliver(event) {
                        return;
                    }
                }
            }
            Err(status) => {
                let failure = describe(&status);
                if last_failure.as_deref() != Some(failure.as_str()) {
                    tracing::warn!(error = %failure, "containerd event stream lost; subscribing again");
                    last_failure = Some(failure);
                }
            }
        }
        tokio::time::sleep(backoff.next_delay(fastrand::f64())).await;
    }
}

/// After a short pause (for the Subscribe request to go out first), whether containerd
/// answers.
async fn answers(containerd: &Containerd) -> bool {
    tokio::time::sleep(Duration::from_millis(20)).await;
    containerd.version().await.is_ok()
}

/// The subscription stands: say so after a gap, and tell the workers to look at their
/// tasks once (exits may have been missed). False when nobody listens any more.
fn subscribed(
    deliver: &mut impl FnMut(TaskEvent) -> bool,
    first: &mut bool,
    last_failure: &mut Option<String>,
    backoff: &mut Backoff,
) -> bool {
    if last_failure.take().is_some() {
        tracing::info!("containerd event stream subscribed again");
    }
    backoff.reset();
    let resync = !std::mem::replace(first, false);
    !resync || deliver(TaskEvent::Resync)
}

/// The event in an envelope, if it is one workers act on.
fn decode(topic: &str, any: Option<&prost_types::Any>) -> Option<TaskEvent> {
    let bytes = any.map(|a| a.value.as_slice())?;
    match topic {
        TOPIC_EXIT => {
            let exit = TaskExit::decode(bytes).ok()?;
            // An exec'd process's exit has its own id; the init process's id is the container's.
            (exit.id == exit.container_id || exit.id.is_empty()).then(|| TaskEvent::Exit {
                exited_at: exit.exited_at.and_then(|t| timestamp(&t)),
                container_id: exit.container_id,
                exit_status: exit.exit_status,
            })
        }
        TOPIC_OOM => {
            let oom = TaskOom::decode(bytes).ok()?;
            Some(TaskEvent::Oom { container_id: oom.container_id })
        }
        _ => None,
    }
}

/// A protobuf timestamp as a jiff one (`None` for the zero value containerd sends for "unset").
pub fn timestamp(t: &prost_types::Timestamp) -> Option<jiff::Timestamp> {
    if t.seconds <= 0 && t.nanos <= 0 {
        return None;
    }
    jiff::Timestamp::new(t.seconds, t.nanos).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn any<M: prost::Message>(m: &M) -> prost_types::Any {
        prost_types::Any { type_url: String::new(), value: m.encode_to_vec() }
    }

    #[test]
    fn decodes_init_exits_and_ooms_and_skips_exec_exits() {
        let exit = TaskExit {
            container_id: "c1".into(),
            id: "c1".into(),
            pid: 42,
            exit_status: 137,
            exited_at: Some(prost_types::Timestamp { seconds: 1_700_000_000, nanos: 5 }),
        };
        assert_eq!(
            decode(TOPIC_EXIT, Some(&any(&exit))),
            Some(TaskEvent::Exit {
                container_id: "c1".into(),
                exit_status: 137,
                exited_at: jiff::Timestamp::new(1_700_000_000, 5).ok(),
            })
        );
        let exec = TaskExit { id: "exec-1".into(), ..exit };
        assert_eq!(decode(TOPIC_EXIT, Some(&any(&exec))), None);
        let oom = TaskOom { container_id: "c2".into() };
        assert_eq!(
            decode(TOPIC_OOM, Some(&any(&oom))),
            Some(TaskEvent::Oom { container_id: "c2".into() })
        );
        assert_eq!(decode("/tasks/start", Some(&any(&oom))), None);
        assert_eq!(decode(TOPIC_EXIT, None), None);
        assert_eq!(
            decode(
                TOPIC_EXIT,
                Some(&prost_types::Any { type_url: String::new(), value: vec![0xff] })
            ),
            None
        );
    }

    #[test]
    fn zero_timestamps_are_unset() {
        assert_eq!(timestamp(&prost_types::Timestamp { seconds: 0, nanos: 0 }), None);
        assert!(timestamp(&prost_types::Timestamp { seconds: 1, nanos: 0 }).is_some());
    }
}
