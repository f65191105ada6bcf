//! N3: kubelet's remote command over SPDY/3.1, each protocol version, with real local
//! processes (`sh`) behind the streams and the test client in front.

use std::os::unix::process::ExitStatusExt as _;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use outpost_formats::spdy::frame::Frame;
use tokio::process::{Child, Command};

use super::*;
use crate::api::spdy::test_client::{Client, Event, Transcript};
use crate::api::streams::{Attached, Ended, Process};
use crate::runtime::exec;

/// The sizes a session applied.
type Sizes = Arc<Mutex<Vec<(u16, u16)>>>;

/// `sh -c script` with the streams of `options`, started when the session asks.
fn local(
    script: &str,
    options: StreamOptions,
    sizes: Sizes,
    pid: Arc<Mutex<Option<u32>>>,
) -> Start {
    let script = script.to_owned();
    Box::new(move || {
        async move {
            let piped = |on: bool| {
                if on { std::process::Stdio::piped() } else { std::process::Stdio::null() }
            };
            let mut child = Command::new("sh")
                .arg("-c")
                .arg(&script)
                .stdin(piped(options.stdin))
                .stdout(piped(options.stdout))
                .stderr(piped(options.stderr))
                .kill_on_drop(true)
                .spawn()
                .map_err(|source| exec::Error::Io {
                    id: "local".into(),
                    step: "start sh",
                    source,
                })?;
            *pid.lock().unwrap() = child.id();
            Ok(Attached {
                stdin: child.stdin.take().map(|s| Box::pin(s) as _),
                stdout: child.stdout.take().map(|s| Box::pin(s) as _),
                stderr: child.stderr.take().map(|s| Box::pin(s) as _),
                process: Box::new(Local { child, sizes }),
            })
        }
        .boxed()
    })
}

struct Local {
    child: Child,
    sizes: Sizes,
}

impl Process for Local {
    fn resize(
        &self,
        width: u16,
        height: u16,
    ) -> futures::future::BoxFuture<'_, Result<(), crate::api::streams::Error>> {
        self.sizes.lock().unwrap().push((width, height));
        async { Ok(()) }.boxed()
    }

    fn wait(mut self: Box<Self>) -> futures::future::BoxFuture<'static, Ended> {
        async move {
            let status = self.child.wait().await.map_err(|source| exec::Error::Io {
                id: "local".into(),
                step: "wait for sh",
                source,
            })?;
            // Killed by a signal: as a shell tells it.
            Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or_default()))
        }
        .boxed()
    }
}

fn limits() -> Limits {
    Limits { max_streams: 128, idle_timeout: None }
}

fn options(stdin: bool, stdout: bool, stderr: bool, tty: bool) -> StreamOptions {
    StreamOptions { stdin, stdout, stderr, tty }
}

/// Runs `script` over `protocol`: the client opens `types`, sends `input` on stdin
/// (then FIN) and reads to the end. The streams' IDs by type, and the transcript.
async fn session(
    protocol: Protocol,
    options: StreamOptions,
    script: &str,
    types: &[&str],
    input: &[u8],
) -> (std::collections::HashMap<String, u32>, Transcript) {
    let (mut client, io) = Client::pair();
    let sizes = Sizes::default();
    let server = tokio::spawn(serve(
        io,
        protocol,
        options,
        vec!["sh".to_owned()],
        local(script, options, sizes, Default::default()),
        limits(),
    ));
    let mut ids = std::collections::HashMap::new();
    for kind in types {
        ids.insert((*kind).to_owned(), client.open(&[("streamType", kind)]).await);
    }
    if let Some(&stdin) = ids.get("stdin") {
        client.send(stdin, input, true).await;
    }
    let transcript = client.read_to_end().await;
    server.await.unwrap();
    (ids, transcript)
}

/// N3: v4 carries stdin, stdout and stderr, and ends with a `metav1.Status` that has
/// the exit code as the `ExitCode` cause of `NonZeroExitCode`.
#[tokio::test]
async fn n3_version_4_streams_and_exit_code() {
    let (ids, transcript) = session(
        Protocol::V4,
        options(true, true, true, false),
        "cat; echo oops >&2; exit 3",
        &["error", "stdin", "stdout", "stderr"],
        b"hello over spdy\n",
    )
    .await;
    assert_eq!(transcript.text(ids["stdout"]), "hello over spdy\n");
    assert_eq!(transcript.text(ids["stderr"]), "oops\n");
    let status: serde_json::Value = serde_json::from_str(&transcript.text(ids["error"])).unwrap();
    assert_eq!(status["status"], "Failure");
    assert_eq!(status["reason"], "NonZeroExitCode");
    assert_eq!(status["details"]["causes"][0]["reason"], "ExitCode");
    assert_eq!(status["details"]["causes"][0]["message"], "3");
    for kind in ["error", "stdout", "stderr"] {
        assert!(transcript.finished.contains(&ids[kind]), "{kind} not finished");
    }
    assert!(matches!(transcript.events.last(), Some(Event::Frame(Frame::GoAway { .. }))));
}

/// N3: v4 says `Success` for exit code 0.
#[tokio::test]
async fn n3_version_4_success() {
    let (ids, transcript) = session(
        Protocol::V4,
        options(false, true, false, false),
        "echo hi",
        &["error", "stdout"],
        b"",
    )
    .await;
    assert_eq!(transcript.text(ids["stdout"]), "hi\n");
    assert_eq!(transcript.text(ids["error"]), r#"{"metadata":{},"status":"Success"}"#);
}

/// N3: before v4 the error stream carries the failure's message as text, and nothing
/// on success.
#[tokio::test]
async fn n3_older_protocols_write_the_message_text() {
    for protocol in [Protocol::V1, Protocol::V2, Protocol::V3] {
        let (ids, transcript) = session(
            protocol,
            options(false, true, false, false),
            "exit 7",
            &["error", "stdout"],
            b"",
        )
        .await;
        assert_eq!(
            transcript.text(ids["error"]),
            "command terminated with non-zero exit code: error executing command [sh], exit code 7",
            "{protocol:?}"
        );
        let (ids, transcript) = session(
            protocol,
            options(false, true, false, false),
            "true",
            &["error", "stdout"],
            b"",
        )
        .await;
        assert_eq!(transcript.text(ids["error"]), "", "{protocol:?}");
    }
}

/// N3: a command that cannot start is an InternalError status.
#[tokio::test]
async fn n3_a_command_that_cannot_start_is_reported() {
    let (mut client, io) = Client::pair();
    let start: Start = Box::new(|| {
        async {
            let state = "no such container";
            Err(exec::Error::NotRunning { id: "c1".into(), state }.into())
        }
        .boxed()
    });
    let server = tokio::spawn(serve(
        io,
        Protocol::V4,
        options(false, true, false, false),
        Vec::new(),
        start,
        limits(),
    ));
    let error = client.open(&[("streamType", "error")]).await;
    client.open(&[("streamType", "stdout")]).await;
    let transcript = client.read_to_end().await;
    server.await.unwrap();
    let status: serde_json::Value = serde_json::from_str(&transcript.text(error)).unwrap();
    assert_eq!(status["reason"], "InternalError");
    assert!(status["message"].as_str().unwrap().contains("no such container"));
}

/// N3: with a TTY, v3 and v4 open a resize stream; its JSON sizes, in any pieces, are
/// applied while the command runs.
#[tokio::test]
async fn n3_resize_is_applied() {
    let (mut client, io) = Client::pair();
    let sizes = Sizes::default();
    let opts = options(true, true, false, true);
    assert_eq!(Protocol::V4.expected_streams(opts), 4);
    assert_eq!(Protocol::V2.expected_streams(opts), 3);
    let server = tokio::spawn(serve(
        io,
        Protocol::V4,
        opts,
        vec!["sh".to_owned()],
        local("cat", opts, sizes.clone(), Default::default()),
        limits(),
    ));
    let _error = client.open(&[("streamType", "error")]).await;
    let stdin = client.open(&[("streamType", "stdin")]).await;
    let stdout = client.open(&[("streamType", "stdout")]).await;
    let resize = client.open(&[("streamType", "resize")]).await;
    client.send(resize, br#"{"Width":80,"#, false).await;
    client.send(resize, br#""Height":24}{"Width":100,"Height":30}"#, false).await;
    client.send(stdin, b"x", true).await;
    let transcript = client.read_to_end().await;
    server.await.unwrap();
    assert_eq!(transcript.text(stdout), "x");
    assert_eq!(*sizes.lock().unwrap(), [(80, 24), (100, 30)]);
}

/// N3: streams that do not all come within kubelet's 30 seconds end the session
/// without starting anything.
#[tokio::test(start_paused = true)]
async fn n3_missing_streams_time_out() {
    let (mut client, io) = Client::pair();
    let start: Start = Box::new(|| async { panic!("started without its streams") }.boxed());
    let server = tokio::spawn(serve(
        io,
        Protocol::V4,
        options(false, true, false, false),
        Vec::new(),
        start,
        limits(),
    ));
    client.open(&[("streamType", "error")]).await;
    let transcript = client.read_to_end().await;
    server.await.unwrap();
    assert!(matches!(transcript.events.last(), Some(Event::Frame(Frame::GoAway { .. }))));
}

/// N3: a client that goes away before the end has the process dropped, which kills it.
#[tokio::test]
async fn n3_a_client_that_goes_away_kills_the_command() {
    let (mut client, io) = Client::pair();
    let pid = Arc::new(Mutex::new(None));
    let opts = options(false, true, false, false);
    let server = tokio::spawn(serve(
        io,
        Protocol::V4,
        opts,
        vec!["sh".to_owned()],
        local("echo up; sleep 600", opts, Sizes::default(), pid.clone()),
        limits(),
    ));
    client.open(&[("streamType", "error")]).await;
    let stdout = client.open(&[("streamType", "stdout")]).await;
    loop {
        if let Some(Event::Frame(Frame::Data { stream_id, .. })) = client.next().await
            && stream_id == stdout
        {
            break;
        }
    }
    let pid = pid.lock().unwrap().expect("the command started");
    drop(client);
    tokio::time::timeout(Duration::from_secs(20), server).await.expect("the session ends").unwrap();
    // SIGKILLed (the signal lands a moment later): gone, or a zombie until reaped.
    let killed = || {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        state.is_empty() || state.contains(") Z ")
    };
    for _ in 0..200 {
        if killed() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(killed(), "the command outlived its client");
}
