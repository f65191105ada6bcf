//! Load on the push endpoint (issue 20): 1,000 requests to `/manifests` from 8 clients at
//! once, PUT and DELETE mixed with invalid ones (bad YAML, invalid pods, bad push keys,
//! wrong tokens, pods already pushed under another key), through the real binary in
//! `--dry-run`. Each client owns its keys, so a model of each key (what it holds, which
//! UIDs the agent gave its pods) says what every answer must be, and which ADDs and
//! REMOVEs the merge must print: every valid change is applied exactly once, every invalid
//! request gets its 4xx and changes nothing. Then the agent is killed (SIGKILL) and started
//! again on the same state dir: the pods restored from the checkpoint (O1, O2) are the ones
//! it ran before, by name, UID and spec.
//!
//! No timing is asserted. The request mix comes from a seed, printed (and taken from
//! `OUTPOST_TEST_SEED` when set) so that a failure can be replayed.

mod model;

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{DefaultHasher, Hash as _, Hasher as _};
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use outpost_tests::agent::{Agent, request_head, split_response};
use outpost_tests::write_private;
use serde_json::Value;

use self::model::{Client, Deltas, Request, Restored, body, check_restored, pods_of};

const TOKEN: &str = "load-token";
const CLIENTS: usize = 8;
/// Requests in all, shared evenly by the clients.
const REQUESTS: usize = 1000;
/// Keys each client pushes under (`c<client>-k<n>`).
const KEYS: usize = 6;
/// The node name the agent runs as (`Agent` passes `Edge-1`): static pod names end in it.
const SUFFIX: &str = "-edge-1";

/// One request on its own connection → (status, JSON answer).
fn call(addr: &str, method: &str, path: &str, token: &str, body: &[u8]) -> (u16, Value) {
    try_call(addr, method, path, token, body)
        .unwrap_or_else(|e| panic!("{method} {path}: no answer: {e}"))
}

/// As [`call`]; what went wrong when no whole answer came (the agent was killed).
fn try_call(
    addr: &str,
    method: &str,
    path: &str,
    token: &str,
    body: &[u8],
) -> Result<(u16, Value), String> {
    let auth = format!("Bearer {token}");
    let mut s = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    s.write_all(request_head(method, path, &[("Authorization", &auth)], body.len()).as_bytes())
        .map_err(|e| format!("write: {e}"))?;
    // The agent may refuse before reading the body (401) and close: a failed write of
    // the rest is part of that answer.
    let _ = s.write_all(body);
    let mut response = String::new();
    s.read_to_string(&mut response).map_err(|e| format!("read: {e}"))?;
    let (status, body) = split_response(&response);
    let json =
        serde_json::from_str(&body).map_err(|e| format!("answer is not JSON ({e}): {response}"))?;
    Ok((status, json))
}

/// Runs client `id`'s share of the requests; its model at the end.
fn client(addr: &str, id: usize, seed: u64) -> Client {
    let mut rng = fastrand::Rng::with_seed(seed.wrapping_add(id as u64));
    let mut client = Client { id, ..Client::default() };
    for _ in 0..REQUESTS / CLIENTS {
        let request = client.next(&mut rng);
        let (status, answer) =
            call(addr, request.method, &request.path, request.token, request.body.as_bytes());
        client.answered(&request, status, &answer);
    }
    client
}

/// As [`client`], until the agent goes away: the model of what was answered, and the
/// request that got no answer (in flight when the agent was killed), if one did not.
fn client_until_gone(
    addr: &str,
    id: usize,
    seed: u64,
    answered: &AtomicUsize,
) -> (Client, Option<Request>) {
    let mut rng = fastrand::Rng::with_seed(seed.wrapping_add(id as u64));
    let mut client = Client { id, ..Client::default() };
    for _ in 0..REQUESTS / CLIENTS {
        let request = client.next(&mut rng);
        match try_call(addr, request.method, &request.path, request.token, request.body.as_bytes())
        {
            Ok((status, answer)) => client.answered(&request, status, &answer),
            Err(_) => return (client, Some(request)),
        }
        answered.fetch_add(1, Ordering::Relaxed);
    }
    (client, None)
}

/// The seed of the request mix: `OUTPOST_TEST_SEED`, or a fresh one, printed.
fn seed(test: &str) -> u64 {
    let seed = std::env::var("OUTPOST_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("{test}: seed {seed} (OUTPOST_TEST_SEED={seed} replays it)");
    seed
}

/// A directory with the token file and an empty manifest dir for [`start`].
fn agent_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("manifests")).unwrap();
    write_private(&dir.path().join("token"), format!("{TOKEN}\n"));
    dir
}

fn start(dir: &Path) -> Agent {
    let args: [std::ffi::OsString; 4] = [
        "--token-file".into(),
        dir.join("token").into(),
        "--state-dir".into(),
        dir.join("state").into(),
    ];
    Agent::start_args(&dir.join("manifests"), &args)
}

/// `/pods`: name → (UID, config hash, hash of the spec).
fn running(agent: &Agent) -> BTreeMap<String, (String, String, u64)> {
    let (status, body) = agent.get("/pods");
    assert_eq!(status, 200, "{body}");
    let list: Value = serde_json::from_str(&body).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pod| {
            let meta = &pod["metadata"];
            let mut hasher = DefaultHasher::new();
            pod["spec"].to_string().hash(&mut hasher);
            let config_hash = meta["annotations"]["kubernetes.io/config.hash"].as_str();
            (
                meta["name"].as_str().unwrap().to_owned(),
                (
                    meta["uid"].as_str().unwrap().to_owned(),
                    config_hash.unwrap_or_default().to_owned(),
                    hasher.finish(),
                ),
            )
        })
        .collect()
}

#[test]
fn a_thousand_mixed_pushes_apply_each_valid_change_once_and_survive_a_kill() {
    let seed = seed("push_load");
    let dir = agent_dir();
    let agent = start(dir.path());

    let clients: Vec<Client> = std::thread::scope(|scope| {
        let addr = agent.addr.as_str();
        let running: Vec<_> =
            (0..CLIENTS).map(|id| scope.spawn(move || client(addr, id, seed))).collect();
        running.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for (what, n) in clients.iter().flat_map(|c| &c.counts) {
        *counts.entry(what).or_default() += n;
    }
    eprintln!("push_load: answers {counts:?}");
    assert_eq!(counts.values().sum::<usize>(), REQUESTS);
    for kind in ["created", "replaced", "unchanged", "deleted", "refused"] {
        assert!(counts.get(kind).is_some_and(|n| *n > 0), "no {kind} in the mix: {counts:?}");
    }

    // Every delta the changes cause, per UID and in order; then a marker, which must
    // come next: nothing else was applied.
    let mut expected: Deltas = BTreeMap::new();
    let mut names = BTreeMap::new();
    for c in &clients {
        expected.extend(c.deltas.clone());
        names.extend(c.names.clone());
    }
    let total: usize = expected.values().map(Vec::len).sum();
    let mut printed: Deltas = BTreeMap::new();
    for _ in 0..total {
        let delta = agent.delta();
        assert_eq!(delta["source"], "push", "{delta}");
        let op = match delta["op"].as_str() {
            Some("ADD") => "ADD",
            Some("REMOVE") => "REMOVE",
            _ => panic!("only ADD and REMOVE are expected: {delta}"),
        };
        printed.entry(delta["uid"].as_str().unwrap().to_owned()).or_default().push(op);
    }
    let (status, answer) =
        call(&agent.addr, "PUT", "/manifests/marker", TOKEN, body("marker", (1, 0)).as_bytes());
    assert_eq!(status, 201, "{answer}");
    let marker = agent.delta();
    assert_eq!(
        (marker["op"].as_str(), marker["name"].as_str()),
        (Some("ADD"), Some(format!("marker-p0{SUFFIX}").as_str())),
        "a change was applied that no answer accounts for: {marker}"
    );
    for (uid, ops) in &expected {
        assert_eq!(printed.get(uid), Some(ops), "pod {} ({uid})", names[uid]);
    }
    assert_eq!(printed.len(), expected.len(), "deltas for UIDs no answer gave");

    // `/pods` and `/manifests` are the model's final state.
    let mut model: BTreeMap<String, String> =
        clients.iter().flat_map(|c| c.keys.values().flat_map(|h| h.pods.clone())).collect();
    model.extend(pods_of(&answer));
    let before = running(&agent);
    let pods: BTreeMap<String, String> =
        before.iter().map(|(name, (uid, _, _))| (name.clone(), uid.clone())).collect();
    assert_eq!(pods, model, "/pods differs from what the answers say is pushed");
    for (name, (uid, config_hash, _)) in &before {
        assert_eq!(uid, config_hash, "S6: {name}");
    }
    let (_, list) = call(&agent.addr, "GET", "/manifests", TOKEN, b"");
    let keys: BTreeSet<String> = list["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["key"].as_str().unwrap().to_owned())
        .collect();
    let mut model_keys: BTreeSet<String> =
        clients.iter().flat_map(|c| c.keys.keys().cloned()).collect();
    model_keys.insert("marker".to_owned());
    assert_eq!(keys, model_keys);

    // SIGKILL (the agent's drop), and a start on the same state dir: the checkpoint
    // brings back exactly the pods that ran, with their UIDs and specs.
    drop(agent);
    let agent = start(dir.path());
    for _ in 0..before.len() {
        let delta = agent.delta();
        assert_eq!((delta["op"].as_str(), delta["source"].as_str()), (Some("ADD"), Some("push")));
    }
    assert_eq!(running(&agent), before, "the restored pods differ from those before the kill");
    let (status, ready) = agent.get("/readyz?verbose");
    assert_eq!(status, 200, "{ready}");
    assert!(ready.contains("[+]source-push ok: from checkpoint"), "{ready}");
}

/// O1 under load: a change is checkpointed before it is answered, so a `kill -9` in the
/// middle of the pushes loses no answered change, and a change in flight is either whole
/// or absent.
#[test]
fn a_kill_during_the_pushes_keeps_every_answered_change() {
    let seed = seed("push_load kill");
    let dir = agent_dir();
    let agent = start(dir.path());
    let answered = AtomicUsize::new(0);
    let (clients, in_flight): (Vec<Client>, Vec<Option<Request>>) = std::thread::scope(|scope| {
        let addr = agent.addr.as_str();
        let answered = &answered;
        let running: Vec<_> = (0..CLIENTS)
            .map(|id| scope.spawn(move || client_until_gone(addr, id, seed, answered)))
            .collect();
        // Past a third of the requests, at whatever point each client is.
        while answered.load(Ordering::Relaxed) < REQUESTS / 3
            && !running.iter().all(|c| c.is_finished())
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        agent.signal("KILL");
        running.into_iter().map(|c| c.join().unwrap()).unzip()
    });
    let flying = in_flight.iter().flatten().count();
    eprintln!(
        "push_load kill: killed after {} answers, {flying} requests in flight",
        answered.load(Ordering::Relaxed)
    );
    assert!(flying > 0, "the kill came after every client had finished");
    drop(agent);

    let agent = start(dir.path());
    // Once the merge has taken the checkpoint's SET.
    agent.poll("/readyz?verbose", |_, body| body.contains("[+]source-push ok"));
    let mut last = Err(String::new());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        let restored: Restored = running_images(&agent);
        last = check_restored(&restored, &clients, &in_flight);
        if last.is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Err(differs) = last {
        panic!("the restored pods lost or changed an answered push: {differs}");
    }
    let (status, ready) = agent.get("/readyz?verbose");
    assert_eq!(status, 200, "{ready}");
}

/// `/pods`: name → (UID, first container's image).
fn running_images(agent: &Agent) -> Restored {
    let (status, body) = agent.get("/pods");
    assert_eq!(status, 200, "{body}");
    let list: Value = serde_json::from_str(&body).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pod| {
            let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
            let uid = pod["metadata"]["uid"].as_str().unwrap().to_owned();
            let image = pod["spec"]["containers"][0]["image"].as_str().unwrap_or_default();
            (name, (uid, image.to_owned()))
        })
        .collect()
}
