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

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{DefaultHasher, Hash as _, Hasher as _};
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;

use outpost_tests::agent::{Agent, request_head, split_response};
use outpost_tests::write_private;
use serde_json::Value;

const TOKEN: &str = "load-token";
const CLIENTS: usize = 8;
/// Requests in all, shared evenly by the clients.
const REQUESTS: usize = 1000;
/// Keys each client pushes under (`c<client>-k<n>`).
const KEYS: usize = 6;
/// The node name the agent runs as (`Agent` passes `Edge-1`): static pod names end in it.
const SUFFIX: &str = "-edge-1";

/// What a key holds: the manifest's shape and the pods the agent made of it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    /// (pods in the manifest, image revision): the body is a function of these.
    shape: (usize, u32),
    /// Pod name (with the node suffix) → UID, as the agent answered.
    pods: BTreeMap<String, String>,
}

/// One request and the answer the model expects.
#[derive(Debug)]
struct Request {
    method: &'static str,
    path: String,
    token: &'static str,
    body: String,
    expect: Expect,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Expect {
    /// A valid PUT: `created`, `replaced` or `unchanged`, of these pod names.
    Put { change: &'static str, shape: (usize, u32) },
    /// A DELETE of a key that holds a manifest.
    Delete,
    /// Refused with this status; nothing changes.
    Refused(u16),
}

/// The ADDs and REMOVEs one client's accepted changes must cause, per UID, in order.
type Deltas = BTreeMap<String, Vec<&'static str>>;

/// One client's keys and what its requests caused.
#[derive(Debug, Default)]
struct Client {
    id: usize,
    keys: BTreeMap<String, Held>,
    deltas: Deltas,
    /// UID → pod name, for every pod an answer named (to name a UID in a failure).
    names: BTreeMap<String, String>,
    counts: BTreeMap<&'static str, usize>,
}

/// The pods of key `key` in shape `(n, revision)`: a Pod for one, a PodList for more.
fn body(key: &str, (n, revision): (usize, u32)) -> String {
    let pod = |i: usize| {
        format!(
            "metadata:\n  name: {key}-p{i}\n  labels:\n    load: push\nspec:\n  containers:\n  - name: main\n    image: busybox:1.{revision}\n    command: [\"sleep\", \"{i}\"]\n"
        )
    };
    if n == 1 {
        return format!("apiVersion: v1\nkind: Pod\n{}", pod(0));
    }
    let mut list = String::from("apiVersion: v1\nkind: PodList\nitems:\n");
    for i in 0..n {
        for (j, line) in pod(i).lines().enumerate() {
            list.push_str(if j == 0 { "- " } else { "  " });
            list.push_str(line);
            list.push('\n');
        }
    }
    list
}

/// A request that must be refused, with its status: each kind of invalid input.
fn invalid(rng: &mut fastrand::Rng, key: &str, other: Option<(&str, &str)>) -> Request {
    let put = |path: String, body: String, token, status| Request {
        method: "PUT",
        path,
        token,
        body,
        expect: Expect::Refused(status),
    };
    let manifests = |k: &str| format!("/manifests/{k}");
    let valid = body(key, (1, 0));
    match rng.u32(0..9) {
        // Not YAML.
        0 => put(
            manifests(key),
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [\n".into(),
            TOKEN,
            400,
        ),
        // S1: no name.
        1 => put(
            manifests(key),
            "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: c\n    image: x\n".into(),
            TOKEN,
            400,
        ),
        // No container; an unknown restart policy.
        2 => put(
            manifests(key),
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {key}-x\nspec:\n  containers: []\n"
            ),
            TOKEN,
            400,
        ),
        3 => put(
            manifests(key),
            valid.replace("spec:\n", "spec:\n  restartPolicy: Sometimes\n"),
            TOKEN,
            400,
        ),
        // Push keys that are not keys: a slash (percent-encoded), too long.
        4 => put(format!("/manifests/{key}%2Fx"), valid, TOKEN, 400),
        5 => put(manifests(&format!("{key}-{}", "k".repeat(253))), valid, TOKEN, 400),
        // Wrong tokens.
        6 => put(manifests(key), valid, "wrong-token", 401),
        7 => Request {
            method: "DELETE",
            path: manifests(key),
            token: "load-toke",
            body: String::new(),
            expect: Expect::Refused(401),
        },
        // A pod another key holds, pushed under this key.
        _ => match other {
            Some((holder, pod)) => {
                let name = pod.trim_end_matches(SUFFIX);
                let stolen = format!(
                    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: main\n    image: busybox:2\n"
                );
                assert_ne!(holder, key, "the conflict comes from another key");
                put(manifests(key), stolen, TOKEN, 409)
            }
            None => put(manifests(key), String::new(), TOKEN, 400),
        },
    }
}

impl Client {
    /// The next request, drawn from `rng`, and what the model says it must do.
    fn next(&self, rng: &mut fastrand::Rng) -> Request {
        let key = format!("c{}-k{}", self.id, rng.usize(0..KEYS));
        let manifests = format!("/manifests/{key}");
        match rng.u32(0..100) {
            0..=49 => {
                let shape = (rng.usize(1..=2), rng.u32(0..3));
                let change = match self.keys.get(&key) {
                    None => "created",
                    Some(held) if held.shape == shape => "unchanged",
                    Some(_) => "replaced",
                };
                Request {
                    method: "PUT",
                    body: body(&key, shape),
                    path: manifests,
                    token: TOKEN,
                    expect: Expect::Put { change, shape },
                }
            }
            50..=69 => Request {
                method: "DELETE",
                path: manifests,
                token: TOKEN,
                body: String::new(),
                expect: if self.keys.contains_key(&key) {
                    Expect::Delete
                } else {
                    Expect::Refused(404)
                },
            },
            _ => {
                // A pod of another of this client's keys, for a conflict.
                let other = self.keys.iter().filter(|(k, _)| **k != key).find_map(|(k, held)| {
                    held.pods.keys().next().map(|p| (k.as_str(), p.as_str()))
                });
                invalid(rng, &key, other)
            }
        }
    }

    /// Checks the answer against the model and applies the change to it.
    fn answered(&mut self, request: &Request, status: u16, answer: &Value) {
        let what = format!("{} {} → {status} {answer}", request.method, request.path);
        let key = request.path.trim_start_matches("/manifests/").to_owned();
        let before = self.keys.get(&key).map(|h| h.pods.clone()).unwrap_or_default();
        let after = match &request.expect {
            Expect::Refused(expected) => {
                assert_eq!(status, *expected, "{what}");
                assert!(answer["error"].is_string(), "{what}");
                *self.counts.entry("refused").or_default() += 1;
                return;
            }
            Expect::Put { change, shape } => {
                let created = *change == "created";
                assert_eq!(status, if created { 201 } else { 200 }, "{what}");
                assert_eq!(answer["change"], *change, "{what}");
                let pods = pods_of(answer);
                let names: Vec<String> =
                    (0..shape.0).map(|i| format!("{key}-p{i}{SUFFIX}")).collect();
                assert_eq!(pods.keys().cloned().collect::<Vec<_>>(), names, "{what}");
                if *change == "unchanged" {
                    assert_eq!(pods, before, "an unchanged manifest keeps its UIDs: {what}");
                }
                *self.counts.entry(*change).or_default() += 1;
                self.keys.insert(key, Held { shape: *shape, pods: pods.clone() });
                pods
            }
            Expect::Delete => {
                assert_eq!(status, 200, "{what}");
                assert_eq!(pods_of(answer), before, "DELETE names what it removed: {what}");
                *self.counts.entry("deleted").or_default() += 1;
                self.keys.remove(&key);
                BTreeMap::new()
            }
        };
        let gone: BTreeSet<&String> = before.values().collect();
        let kept: BTreeSet<&String> = after.values().collect();
        for uid in gone.difference(&kept) {
            self.deltas.entry((*uid).clone()).or_default().push("REMOVE");
        }
        for uid in kept.difference(&gone) {
            self.deltas.entry((*uid).clone()).or_default().push("ADD");
        }
        for (name, uid) in after {
            self.names.insert(uid, name);
        }
    }
}

/// `pods: [{name, uid}]` of a push answer → name → UID.
fn pods_of(answer: &Value) -> BTreeMap<String, String> {
    answer["pods"]
        .as_array()
        .unwrap_or_else(|| panic!("no pods in {answer}"))
        .iter()
        .map(|p| (p["name"].as_str().unwrap().to_owned(), p["uid"].as_str().unwrap().to_owned()))
        .collect()
}

/// One request on its own connection → (status, JSON answer).
fn call(addr: &str, method: &str, path: &str, token: &str, body: &[u8]) -> (u16, Value) {
    let auth = format!("Bearer {token}");
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(request_head(method, path, &[("Authorization", &auth)], body.len()).as_bytes())
        .unwrap();
    // The agent may refuse before reading the body (401) and close: a failed write of
    // the rest is part of that answer.
    let _ = s.write_all(body);
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    let (status, body) = split_response(&response);
    let json = serde_json::from_str(&body)
        .unwrap_or_else(|e| panic!("{method} {path}: answer is not JSON ({e}): {response}"));
    (status, json)
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
    let seed = std::env::var("OUTPOST_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("push_load: seed {seed} (OUTPOST_TEST_SEED={seed} replays it)");
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("manifests")).unwrap();
    write_private(&dir.path().join("token"), format!("{TOKEN}\n"));
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
