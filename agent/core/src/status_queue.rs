//! The pod status manager's queue, as a value (SEMANTICS.md O3): the status each API
//! object should have, what was last sent successfully, and when a failed send may be
//! retried. The caller supplies the clock and does the sending, so the policy is a pure
//! function that tests can walk exhaustively.
//!
//! - Coalescing: an object has one slot; a new status replaces the one waiting, so
//!   however many changes happen while the API server is away, one send carries the
//!   latest.
//! - "Changed since last sent": a status equal to the last one sent successfully is
//!   not sent again.
//! - Order: of the objects due, the oldest (by the caller's order key: the pod's
//!   creation) goes first; ties by key.
//! - Backoff: each object has its own; a failure pushes its next attempt back, a
//!   success resets it.
//! - Finishing (kubelet's "can be deleted"): an object marked finished is deleted once
//!   its latest status has been sent.
//! - Spreading (B13): after a long outage, what waits is spread over a window, each
//!   object due at its own random point of it; a status that changes meanwhile keeps
//!   its place and is sent as it is then (the latest).
//! - A storm's end: when the server takes writes again after refusing them all (403,
//!   429, 503 while it stays reachable), what backs off for a failure is due at once
//!   ([`StatusQueue::retry_now`]), so that the sync does not wait for each object's
//!   next retry.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use crate::backoff::Backoff;

/// What to do next for one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<S> {
    /// Send this status.
    Send(S),
    /// The final status is in: delete the object.
    Delete,
}

#[derive(Debug, Clone)]
struct Slot<O, S> {
    order: O,
    latest: Option<S>,
    sent: Option<S>,
    finish: bool,
    backoff: Backoff,
    /// Not before this time (after a failure, or its point of a spread).
    retry_at: Option<Duration>,
    /// `retry_at` is a failure's (not a spread's).
    failed: bool,
}

impl<O, S: PartialEq> Slot<O, S> {
    /// Not backing off (or waiting for its point of a spread) at `now`.
    fn ready(&self, now: Duration) -> bool {
        self.retry_at.is_none_or(|at| at <= now)
    }

    fn action(&self) -> Option<Action<&S>> {
        match &self.latest {
            Some(latest) if self.sent.as_ref() != Some(latest) => Some(Action::Send(latest)),
            _ if self.finish => Some(Action::Delete),
            _ => None,
        }
    }
}

/// Objects keyed by `K` (the API object's UID), ordered by `O`, with statuses `S`.
#[derive(Debug, Clone)]
pub struct StatusQueue<K, O, S> {
    slots: HashMap<K, Slot<O, S>>,
    backoff: Backoff,
}

impl<K, O, S> StatusQueue<K, O, S>
where
    K: Eq + Hash + Ord + Clone,
    O: Ord + Clone,
    S: PartialEq + Clone,
{
    /// Each object backs off with its own copy of `backoff`.
    pub fn new(backoff: Backoff) -> StatusQueue<K, O, S> {
        StatusQueue { slots: HashMap::new(), backoff }
    }

    /// The status `key` should have now (replaces any status still waiting).
    pub fn update(&mut self, key: K, order: O, status: S) {
        let slot = self.slot(key, order);
        slot.latest = Some(status);
    }

    /// Delete `key` once its latest status (if any) is sent.
    pub fn finish(&mut self, key: K, order: O) {
        self.slot(key, order).finish = true;
    }

    fn slot(&mut self, key: K, order: O) -> &mut Slot<O, S> {
        let backoff = self.backoff;
        let slot = self.slots.entry(key).or_insert_with(|| Slot {
            order: order.clone(),
            latest: None,
            sent: None,
            finish: false,
            backoff,
            retry_at: None,
            failed: false,
        });
        slot.order = order;
        slot
    }

    /// Forgets every object `keep` rejects (gone from the desired pods).
    pub fn retain(&mut self, mut keep: impl FnMut(&K) -> bool) {
        self.slots.retain(|key, _| keep(key));
    }

    /// Forgets one object (the server no longer has it, or it was deleted).
    pub fn forget(&mut self, key: &K) {
        self.slots.remove(key);
    }

    /// Objects with something to send, due or backing off.
    pub fn pending(&self) -> usize {
        self.slots.values().filter(|s| s.action().is_some()).count()
    }

    /// Objects with something to send at `now` (not backing off).
    pub fn due(&self, now: Duration) -> usize {
        self.slots.values().filter(|s| s.ready(now) && s.action().is_some()).count()
    }

    /// Spreads what waits over `window` from `now`: each object with something to send
    /// is due at `now + window × draw()` (`draw` in `[0, 1)`, drawn oldest object first),
    /// or later if it backs off.
    pub fn spread(&mut self, now: Duration, window: Duration, mut draw: impl FnMut() -> f64) {
        if window.is_zero() {
            return;
        }
        let mut waiting: Vec<(O, K)> = self
            .slots
            .iter()
            .filter(|(_, s)| s.action().is_some())
            .map(|(k, s)| (s.order.clone(), k.clone()))
            .collect();
        waiting.sort();
        for (_, key) in waiting {
            if let Some(slot) = self.slots.get_mut(&key) {
                let at = now + window.mul_f64(draw().clamp(0.0, 1.0));
                if slot.retry_at.is_none_or(|r| r <= at) {
                    slot.retry_at = Some(at);
                    slot.failed = false;
                }
            }
        }
    }

    /// The oldest object with something to do at `now`, and what.
    pub fn next(&self, now: Duration) -> Option<(K, Action<S>)> {
        self.slots
            .iter()
            .filter(|(_, s)| s.ready(now))
            .filter_map(|(k, s)| Some(((&s.order, k), s.action()?)))
            .min_by(|a, b| a.0.cmp(&b.0))
            .map(|((_, k), action)| {
                let action = match action {
                    Action::Send(s) => Action::Send(s.clone()),
                    Action::Delete => Action::Delete,
                };
                (k.clone(), action)
            })
    }

    /// When the earliest object backing off becomes due (`None`: none is).
    pub fn next_retry(&self) -> Option<Duration> {
        self.slots.values().filter(|s| s.action().is_some()).filter_map(|s| s.retry_at).min()
    }

    /// The status last sent successfully for `key`.
    pub fn last_sent(&self, key: &K) -> Option<&S> {
        self.slots.get(key)?.sent.as_ref()
    }

    /// `status` was sent successfully.
    pub fn sent(&mut self, key: &K, status: S) {
        if let Some(slot) = self.slots.get_mut(key) {
            slot.sent = Some(status);
            slot.backoff.reset();
            slot.retry_at = None;
            slot.failed = false;
        }
    }

    /// What the server has is unknown (re-read after a conflict): the latest status is
    /// sent again even if it was sent before.
    pub fn unknown(&mut self, key: &K) {
        if let Some(slot) = self.slots.get_mut(key) {
            slot.sent = None;
        }
    }

    /// A send failed at `now`; `delay` picks the wait from the object's backoff (and
    /// may raise it, e.g. to the server's `Retry-After`). Returns the wait.
    pub fn failed(
        &mut self,
        key: &K,
        now: Duration,
        delay: impl FnOnce(&mut Backoff) -> Duration,
    ) -> Option<Duration> {
        let slot = self.slots.get_mut(key)?;
        let wait = delay(&mut slot.backoff);
        slot.retry_at = Some(now + wait);
        slot.failed = true;
        Some(wait)
    }

    /// The server takes writes again after refusing them all for a while (a storm of
    /// 403, 429 or 503): what backs off for a failure is due now. Each keeps its backoff,
    /// so one that fails again waits longer, as before; what waits for its point of a
    /// spread keeps it.
    pub fn retry_now(&mut self) {
        for slot in self.slots.values_mut().filter(|s| s.failed) {
            slot.retry_at = None;
            slot.failed = false;
        }
    }
}

#[cfg(test)]
mod tests;
