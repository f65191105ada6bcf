//! V1, K1: a pod's wait for the API objects it refers to. The objects' cache starts to
//! watch what a pod refers to when the pod comes, so the first answers may still be on
//! their way when its sandbox is due or a container is to start. The worker is told
//! what has been answered ([`Answers`], with the pod and whenever it changes) and
//! decides here: while the API server answers, what needs the objects waits for them up
//! to [`FIRST_ANSWER`], and goes on as soon as they come; after that, or at once when
//! the server is unreachable, it goes on with what is known (an object never answered
//! resolves as unavailable, and the runtime says what that breaks), except that an API
//! pod's containers do not start without their Services (kubelet's
//! `CreateContainerConfigError` with [`SERVICES_NOT_READ`], retried at its backoff and
//! as soon as they are read).

use std::time::{Duration, Instant};

use super::input::Answers;

/// How long what needs the objects waits for their first answer while the API server
/// answers (kubelet's watch-based manager waits a second for its cache; a little more
/// here, since the watch starts only when the pod comes).
pub const FIRST_ANSWER: Duration = Duration::from_secs(5);

/// kubelet's message when its Service informer has not listed yet.
pub const SERVICES_NOT_READ: &str =
    "services have not yet been read at least once, cannot construct envvars";

/// What waits for the answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Needs {
    /// The sandbox's volumes: the ConfigMaps and Secrets.
    Volumes,
    /// A container's env: those and the Services (K1).
    Env,
}

/// What the answers allow now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Gate {
    /// Go on: everything was answered, or the wait is over.
    Go,
    /// Wait for the answers until then, or until they come.
    Until(Instant),
}

/// A pod's answers, and the end of its wait for those missing.
#[derive(Debug, Clone, Default)]
pub(super) struct ObjectsWait {
    answers: Answers,
    /// Set when something first waited for missing answers; cleared once they are all in.
    deadline: Option<Instant>,
}

impl ObjectsWait {
    pub(super) fn new(answers: Answers) -> ObjectsWait {
        ObjectsWait { answers, deadline: None }
    }

    /// What is answered now. Complete answers end the wait; answers missing again later
    /// (the pod refers to another object) start another.
    pub(super) fn told(&mut self, answers: Answers) {
        self.answers = answers;
        if answers.complete() {
            self.deadline = None;
        }
    }

    /// Whether what `needs` the answers may go on at `now`; the first call with answers
    /// missing starts the wait.
    pub(super) fn gate(&mut self, needs: Needs, now: Instant) -> Gate {
        let answered = match needs {
            Needs::Volumes => self.answers.objects,
            Needs::Env => self.answers.complete(),
        };
        if answered || !self.answers.reachable {
            return Gate::Go;
        }
        let deadline = *self.deadline.get_or_insert(now + FIRST_ANSWER);
        if now < deadline { Gate::Until(deadline) } else { Gate::Go }
    }

    /// K1: the pod's Services were not read (asked once the gate says go).
    pub(super) fn services_missing(&self) -> bool {
        !self.answers.services
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MISSING: Answers = Answers { objects: false, services: true, reachable: true };

    #[test]
    fn v1_complete_answers_never_wait() {
        let now = Instant::now();
        let mut wait = ObjectsWait::new(Answers::ALL);
        assert_eq!(wait.gate(Needs::Env, now), Gate::Go);
        assert!(!wait.services_missing());
    }

    #[test]
    fn v1_missing_answers_wait_once_up_to_the_first_answer_time() {
        let now = Instant::now();
        let mut wait = ObjectsWait::new(MISSING);
        let end = now + FIRST_ANSWER;
        assert_eq!(wait.gate(Needs::Env, now), Gate::Until(end));
        // Asked again later: the same wait, not a new one.
        assert_eq!(wait.gate(Needs::Env, now + Duration::from_secs(3)), Gate::Until(end));
        assert_eq!(
            wait.gate(Needs::Env, end),
            Gate::Go,
            "the wait is over: go on with what is known"
        );
        assert_eq!(wait.gate(Needs::Env, end + Duration::from_secs(60)), Gate::Go);
    }

    #[test]
    fn v1_an_unreachable_server_is_not_waited_for() {
        let mut wait = ObjectsWait::new(Answers { reachable: false, ..MISSING });
        assert_eq!(wait.gate(Needs::Env, Instant::now()), Gate::Go);
    }

    #[test]
    fn v1_answers_coming_end_the_wait_and_a_new_gap_waits_again() {
        let now = Instant::now();
        let mut wait = ObjectsWait::new(MISSING);
        assert_eq!(wait.gate(Needs::Env, now), Gate::Until(now + FIRST_ANSWER));
        wait.told(Answers::ALL);
        assert_eq!(wait.gate(Needs::Env, now + Duration::from_secs(1)), Gate::Go);
        // The pod now refers to an object not answered yet: a wait of its own.
        let later = now + Duration::from_secs(30);
        wait.told(MISSING);
        assert_eq!(wait.gate(Needs::Env, later), Gate::Until(later + FIRST_ANSWER));
    }

    #[test]
    fn k1_volumes_do_not_wait_for_services() {
        let mut wait = ObjectsWait::new(Answers { services: false, ..Answers::ALL });
        assert_eq!(wait.gate(Needs::Volumes, Instant::now()), Gate::Go);
    }

    #[test]
    fn k1_services_not_read_are_missing_once_the_wait_is_over() {
        let now = Instant::now();
        let mut wait = ObjectsWait::new(Answers { services: false, ..Answers::ALL });
        assert_eq!(wait.gate(Needs::Env, now), Gate::Until(now + FIRST_ANSWER));
        assert_eq!(wait.gate(Needs::Env, now + FIRST_ANSWER), Gate::Go);
        assert!(wait.services_missing());
    }
}
