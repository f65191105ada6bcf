//! The push load test's model: the requests each client sends (drawn from a seeded
//! generator), what each key holds, and the answers and deltas those requests must
//! cause.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{KEYS, SUFFIX, TOKEN};

/// What a key holds: the manifest's shape and the pods the agent made of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// (pods in the manifest, image revision): the body is a function of these.
    pub shape: (usize, u32),
    /// Pod name (with the node suffix) → UID, as the agent answered.
    pub pods: BTreeMap<String, String>,
}

/// One request and the answer the model expects.
#[derive(Debug)]
pub struct Request {
    pub method: &'static str,
    pub path: String,
    pub token: &'static str,
    pub body: String,
    pub expect: Expect,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// A valid PUT: `created`, `replaced` or `unchanged`, of these pod names.
    Put { change: &'static str, shape: (usize, u32) },
    /// A DELETE of a key that holds a manifest.
    Delete,
    /// Refused with this status; nothing changes.
    Refused(u16),
}

/// The ADDs and REMOVEs one client's accepted changes must cause, per UID, in order.
pub type Deltas = BTreeMap<String, Vec<&'static str>>;

/// One client's keys and what its requests caused.
#[derive(Debug, Default)]
pub struct Client {
    pub id: usize,
    pub keys: BTreeMap<String, Held>,
    pub deltas: Deltas,
    /// UID → pod name, for every pod an answer named (to name a UID in a failure).
    pub names: BTreeMap<String, String>,
    pub counts: BTreeMap<&'static str, usize>,
}

/// The pods of key `key` in shape `(n, revision)`: a Pod for one, a PodList for more.
pub fn body(key: &str, (n, revision): (usize, u32)) -> String {
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
    pub fn next(&self, rng: &mut fastrand::Rng) -> Request {
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
    pub fn answered(&mut self, request: &Request, status: u16, answer: &Value) {
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
pub fn pods_of(answer: &Value) -> BTreeMap<String, String> {
    answer["pods"]
        .as_array()
        .unwrap_or_else(|| panic!("no pods in {answer}"))
        .iter()
        .map(|p| (p["name"].as_str().unwrap().to_owned(), p["uid"].as_str().unwrap().to_owned()))
        .collect()
}

impl Request {
    /// The push key in the path.
    pub fn key(&self) -> &str {
        self.path.trim_start_matches("/manifests/")
    }
}

/// A restored pod: its UID and its container's image.
pub type Restored = BTreeMap<String, (String, String)>;

/// The key a pod of these tests was pushed under (`c1-k2-p0-edge-1` → `c1-k2`).
fn key_of(name: &str) -> Option<&str> {
    name.strip_suffix(SUFFIX)?.rsplit_once("-p").map(|(key, _)| key)
}

/// Whether the pods restored after a kill keep every change the agent acknowledged: each
/// key holds what its last answered request left, except the key of a request in flight
/// at the kill, which may hold that request's result instead. What differs, if not.
pub fn check_restored(
    restored: &Restored,
    clients: &[Client],
    in_flight: &[Option<Request>],
) -> Result<(), String> {
    let mut by_key: BTreeMap<&str, Restored> = BTreeMap::new();
    for (name, pod) in restored {
        let key = key_of(name).ok_or_else(|| format!("pod {name} was never pushed"))?;
        by_key.entry(key).or_default().insert(name.clone(), pod.clone());
    }
    let mut checked = BTreeSet::new();
    for (client, flying) in clients.iter().zip(in_flight) {
        for k in 0..KEYS {
            let key = format!("c{}-k{k}", client.id);
            let found = by_key.get(key.as_str()).cloned().unwrap_or_default();
            checked.insert(key.clone());
            let acked = client.keys.get(&key);
            if holds(&found, acked) {
                continue;
            }
            let unacknowledged = match flying {
                Some(r) if r.key() == key => match &r.expect {
                    Expect::Put { shape, .. } => Some(*shape),
                    Expect::Delete => None,
                    Expect::Refused(_) => {
                        return Err(format!("{key}: {found:?}, acknowledged {acked:?}"));
                    }
                },
                _ => return Err(format!("{key}: {found:?}, acknowledged {acked:?}")),
            };
            if !matches_shape(&key, &found, unacknowledged) {
                return Err(format!(
                    "{key}: {found:?}, neither the acknowledged {acked:?} nor the result of the request in flight ({:?})",
                    flying.as_ref().map(|r| (&r.method, &r.expect))
                ));
            }
        }
    }
    match by_key.keys().find(|k| !checked.contains(**k)) {
        Some(key) => Err(format!("pods restored for key {key}, which no client used")),
        None => Ok(()),
    }
}

/// Whether `found` is exactly what `held` says: same names and UIDs, images of its shape.
fn holds(found: &Restored, held: Option<&Held>) -> bool {
    let Some(held) = held else { return found.is_empty() };
    let uids: BTreeMap<String, String> =
        found.iter().map(|(name, (uid, _))| (name.clone(), uid.clone())).collect();
    uids == held.pods && found.values().all(|(_, image)| *image == image_of(held.shape))
}

/// Whether `found` has the names and images of `shape` under `key` (none for `None`).
fn matches_shape(key: &str, found: &Restored, shape: Option<(usize, u32)>) -> bool {
    let Some(shape) = shape else { return found.is_empty() };
    let names: Vec<String> = (0..shape.0).map(|i| format!("{key}-p{i}{SUFFIX}")).collect();
    found.keys().cloned().collect::<Vec<_>>() == names
        && found.values().all(|(_, image)| *image == image_of(shape))
}

/// The image [`body`] gives a shape's pods.
fn image_of((_, revision): (usize, u32)) -> String {
    format!("busybox:1.{revision}")
}
