//! What the client and the serving certificate tasks do alike (kubelet's certificate
//! manager runs one loop for both): keep the current pair until its rotation deadline
//! and renew it then, get one when there is none or it expired, and after a failure say
//! why in the certificate's status and try again after a jittered backoff.
//!
//! Whether a certificate has ended, and when its deadline comes, is the API server's
//! time's to say ([`server_time`]): the server judges the certificate. Before its first
//! answer the local clock is all there is, and a board's clock may be years behind (no
//! real-time clock) or have stepped ahead: on its word alone a certificate is neither
//! thrown away nor renewed, and a certificate whose start is still to come is kept (the
//! cluster issued it, so the clock is behind).

use std::time::{Duration, SystemTime};

use outpost_core::backoff::Backoff;
use outpost_core::certificates::rotation_deadline;
use tokio::sync::watch;

use super::Error;
use super::pki::Pair;
use super::status::CertificateStatus;
use crate::apiserver::server_time;

/// The backoff between failed attempts.
const RETRY: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));

/// One certificate's manager, as [`run`] drives it.
pub(super) trait Rotation: Send + Sync {
    /// Where the certificate stands.
    fn status(&self) -> &watch::Sender<CertificateStatus>;

    /// The current pair if it is valid now (an expired one is reported, and `None`).
    fn valid_current(&self) -> Result<Option<Pair>, Error>;

    /// Waits for `pair`'s rotation deadline and renews it.
    fn keep(&self, pair: &Pair) -> impl Future<Output = Result<(), Error>> + Send;

    /// Gets a pair when there is no valid one.
    fn obtain(&self) -> impl Future<Output = Result<(), Error>> + Send;

    /// Logs a failed attempt, as loudly as the certificate's state calls for.
    fn failed(&self, problem: &str);
}

/// Forever: keep, or obtain, the certificate; after a failure, report it and back off.
pub(super) async fn run(rotation: impl Rotation) {
    let mut backoff = RETRY;
    loop {
        let outcome = match rotation.valid_current() {
            Ok(Some(pair)) => rotation.keep(&pair).await,
            Ok(None) => rotation.obtain().await,
            Err(e) => Err(e),
        };
        match outcome {
            Ok(()) => backoff.reset(),
            Err(e) => {
                report(&rotation, &e);
                tokio::time::sleep(backoff.next_delay(fastrand::f64())).await;
            }
        }
    }
}

/// A failed attempt: logged, and kept in the status as its problem.
pub(super) fn report(rotation: &impl Rotation, error: &Error) {
    let problem = crate::error_chain::describe(error);
    rotation.failed(&problem);
    rotation.status().send_modify(|s| {
        s.problem = Some(problem);
        s.renew_errors += 1;
    });
}

/// Whether `pair` has ended by the API server's time. By the local clock alone it has not
/// (the server's first answer decides), and one whose start is to come is kept.
pub(super) fn ended(pair: &Pair) -> bool {
    let clock = server_time::global();
    let now = clock.trusted_now();
    if now < pair.not_before {
        tracing::warn!(
            clock = %outpost_core::certificates::rfc3339(now),
            not_before = %outpost_core::certificates::rfc3339(pair.not_before),
            path = %pair.path.display(),
            "the clock reads before the certificate's start: the clock is behind (a board without a real-time clock?); keeping the certificate"
        );
        return false;
    }
    now >= pair.not_after && clock.is_known()
}

/// Waits until `until` by the API server's time, or until either clock steps (`false`:
/// judge `pair` again). When only the local clock says that `until` has come or that
/// `pair` has not started, waits for the server's time first.
pub(super) async fn wait_until(until: SystemTime, pair: &Pair) -> bool {
    let clock = server_time::global();
    let mut steps = clock.steps();
    let now = clock.trusted_now();
    if !clock.is_known() && (now >= until || now < pair.not_before) {
        tracing::info!(
            path = %pair.path.display(),
            "the local clock alone says this certificate is due or not yet valid: waiting for the API server's time"
        );
        let _ = steps.changed().await;
        return false;
    }
    if let Ok(wait) = until.duration_since(now) {
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = steps.changed() => return false,
        }
    }
    true
}

/// When `pair` is renewed: the deadline drawn already for its file (a retry after a
/// failed renewal keeps it), else a new draw in kubelet's 70–90 % of its lifetime.
pub(super) fn deadline(status: &watch::Sender<CertificateStatus>, pair: &Pair) -> SystemTime {
    let known = status.borrow();
    match known.rotation_deadline {
        Some(deadline) if known.path.as_ref() == Some(&pair.path) => deadline,
        _ => rotation_deadline(pair.not_before, pair.not_after, fastrand::f64()),
    }
}
