//! The exec audit: per pod, the last [`PER_POD`] processes its containers ran (and how
//! they ended), for at most [`MAX_PODS`] pods; and per container, how many execs there
//! were (`outpost_pod_process_execs_total`). Pure and bounded: the oldest entries go
//! first, and a pod's log goes with the pod.

use std::collections::{HashMap, VecDeque};

use serde::Serialize;

pub const PER_POD: usize = 256;
pub const MAX_PODS: usize = 1024;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Exec,
    Exit,
}

/// One audit entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub kind: Kind,
    /// RFC 3339.
    pub time: String,
    pub container: String,
    pub container_id: String,
    /// The process id on the host.
    pub pid: u32,
    /// The process id in the container's pid namespace.
    pub ns_pid: u32,
    pub comm: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ppid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// Exits: the status containerd would report (128 + n after signal n).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<u32>,
}

/// One pod's log.
#[derive(Debug, Clone, Default)]
pub struct PodLog {
    pub namespace: String,
    pub name: String,
    pub entries: VecDeque<Entry>,
    /// Execs per container name, since the agent started.
    pub execs: HashMap<String, u64>,
}

/// Every pod's log, by pod UID.
#[derive(Debug)]
pub struct AuditLog {
    pods: HashMap<String, PodLog>,
    /// UIDs in the order their logs were made (the first goes when there are too many).
    order: VecDeque<String>,
    per_pod: usize,
    max_pods: usize,
}

impl Default for AuditLog {
    fn default() -> AuditLog {
        AuditLog::new(PER_POD, MAX_PODS)
    }
}

impl AuditLog {
    pub fn new(per_pod: usize, max_pods: usize) -> AuditLog {
        AuditLog { pods: HashMap::new(), order: VecDeque::new(), per_pod, max_pods }
    }

    /// Adds `entry` to pod `uid`'s log.
    pub fn record(&mut self, uid: &str, namespace: &str, name: &str, entry: Entry) {
        if !self.pods.contains_key(uid) {
            while self.pods.len() >= self.max_pods.max(1) {
                let Some(oldest) = self.order.pop_front() else { break };
                self.pods.remove(&oldest);
            }
            self.order.push_back(uid.to_owned());
        }
        let log = self.pods.entry(uid.to_owned()).or_default();
        if log.name.is_empty() {
            namespace.clone_into(&mut log.namespace);
            name.clone_into(&mut log.name);
        }
        if entry.kind == Kind::Exec {
            *log.execs.entry(entry.container.clone()).or_default() += 1;
        }
        if log.entries.len() >= self.per_pod {
            log.entries.pop_front();
        }
        if self.per_pod > 0 {
            log.entries.push_back(entry);
        }
    }

    pub fn get(&self, uid: &str) -> Option<&PodLog> {
        self.pods.get(uid)
    }

    pub fn pods(&self) -> impl Iterator<Item = &PodLog> {
        self.pods.values()
    }

    /// The pod is gone: its log goes too.
    pub fn remove(&mut self, uid: &str) {
        if self.pods.remove(uid).is_some() {
            self.order.retain(|u| u != uid);
        }
    }

    pub fn len(&self) -> usize {
        self.pods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn exec(container: &str, pid: u32) -> Entry {
        Entry {
            kind: Kind::Exec,
            time: "2026-01-01T00:00:00Z".into(),
            container: container.into(),
            container_id: format!("{container}-id"),
            pid,
            ns_pid: 1,
            comm: "sh".into(),
            ppid: Some(1),
            uid: Some(0),
            filename: Some("/bin/ls".into()),
            argv: vec!["ls".into(), "/".into()],
            exit_code: None,
            signal: None,
        }
    }

    #[test]
    fn keeps_the_last_entries_and_counts_every_exec() {
        let mut log = AuditLog::new(3, 10);
        for pid in 0..5 {
            log.record("u1", "ns", "p", exec("c", pid));
        }
        let pod = log.get("u1").unwrap();
        assert_eq!(pod.entries.iter().map(|e| e.pid).collect::<Vec<_>>(), [2, 3, 4]);
        assert_eq!(pod.execs["c"], 5);
        assert_eq!((pod.namespace.as_str(), pod.name.as_str()), ("ns", "p"));
        let exit = Entry { kind: Kind::Exit, exit_code: Some(3), ..exec("c", 9) };
        log.record("u1", "ns", "p", exit);
        assert_eq!(log.get("u1").unwrap().execs["c"], 5, "exits are not execs");
        log.remove("u1");
        assert!(log.is_empty());
    }

    #[test]
    fn the_oldest_pod_goes_first() {
        let mut log = AuditLog::new(2, 2);
        log.record("u1", "ns", "a", exec("c", 1));
        log.record("u2", "ns", "b", exec("c", 2));
        log.record("u1", "ns", "a", exec("c", 3));
        log.record("u3", "ns", "c", exec("c", 4));
        assert!(log.get("u1").is_none());
        assert!(log.get("u2").is_some() && log.get("u3").is_some());
    }

    #[test]
    fn entries_serialize_with_camel_case_and_without_empty_fields() {
        let json = serde_json::to_value(exec("c", 7)).unwrap();
        assert_eq!(json["kind"], "exec");
        assert_eq!(json["containerId"], "c-id");
        assert_eq!(json["argv"][1], "/");
        assert!(json.get("exitCode").is_none());
    }

    proptest! {
        #[test]
        fn never_holds_more_than_its_bounds(ops in proptest::collection::vec((0u8..20, any::<bool>()), 0..400)) {
            let mut log = AuditLog::new(4, 5);
            for (pod, remove) in ops {
                let uid = format!("u{pod}");
                if remove { log.remove(&uid) } else { log.record(&uid, "ns", "p", exec("c", 1)) }
                prop_assert!(log.len() <= 5);
                prop_assert!(log.pods().all(|p| p.entries.len() <= 4));
                prop_assert_eq!(log.order.len(), log.pods.len());
            }
        }
    }
}
