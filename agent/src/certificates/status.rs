//! Where a certificate stands ([`CertificateStatus`]): what the client and serving
//! certificate managers publish for `/status`, the metrics and the Node condition.

use std::path::PathBuf;
use std::time::SystemTime;

use outpost_core::certificates::{Expiry, Held, Lapse, expiry};
use tokio::sync::watch;

use super::pki::Pair;

/// Where one certificate stands.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CertificateStatus {
    /// Its validity, once there is one.
    pub not_before: Option<SystemTime>,
    pub not_after: Option<SystemTime>,
    /// The file it is in.
    pub path: Option<PathBuf>,
    /// When it is renewed (with rotation).
    pub rotation_deadline: Option<SystemTime>,
    /// Renewals done since the agent started.
    pub rotations: u64,
    /// Failed attempts to get or renew one.
    pub renew_errors: u64,
    /// What is wrong, loudly (expired and no way to renew it, a request denied).
    pub problem: Option<String>,
    /// The last time the certificate was found expired and then replaced (the Node
    /// condition says so once the node can write again).
    pub lapse: Option<Lapse>,
}

impl CertificateStatus {
    /// How it stands at `now`: `None` without a certificate.
    pub fn expiry(&self, now: SystemTime) -> Option<Expiry> {
        Some(expiry(now, self.not_before?, self.not_after?))
    }

    /// Shows `pair` as the node's certificate (its validity and file), in use or found
    /// expired.
    pub(super) fn shows(&mut self, pair: &Pair) {
        self.not_before = Some(pair.not_before);
        self.not_after = Some(pair.not_after);
        self.path = Some(pair.path.clone());
    }

    /// Takes `pair` as the certificate in use; replacing one that had ended is a lapse.
    pub(super) fn took(&mut self, pair: &Pair) {
        let now = crate::apiserver::server_time::trusted_now();
        if let Some(expired_at) = self.not_after.filter(|end| *end <= now) {
            self.lapse = Some(Lapse { expired_at, replaced_at: now });
        }
        self.shows(pair);
        self.rotation_deadline = None;
        self.problem = None;
    }

    /// What the Node condition needs of it, as the certificate of `kind`.
    pub fn held(&self, kind: &'static str) -> Held {
        Held { kind, not_after: self.not_after, problem: self.problem.clone(), lapse: self.lapse }
    }
}

/// The client certificate's status, shared with `/status` and the metrics.
pub type Status = watch::Receiver<CertificateStatus>;

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::Duration;

    fn pair(name: &str, from: SystemTime, to: SystemTime) -> Pair {
        Pair {
            path: PathBuf::from(name),
            not_before: from,
            not_after: to,
            common_name: "system:node:edge-1".into(),
        }
    }

    /// J2: replacing a certificate that had ended records the lapse (for the Node
    /// condition); a rotation before the end does not, and keeps an earlier lapse.
    #[test]
    fn j2_replacing_an_ended_certificate_is_a_lapse() {
        let now = SystemTime::now();
        let hour = Duration::from_secs(3600);
        let mut status = CertificateStatus::default();
        status.took(&pair("a.pem", now - hour * 2, now - hour));
        assert_eq!(status.lapse, None, "the first certificate replaces none");
        status.problem = Some("cannot reach the server".into());
        status.took(&pair("b.pem", now, now + hour));
        let lapse = status.lapse.expect("the ended certificate's lapse");
        assert_eq!(lapse.expired_at, now - hour);
        assert!(lapse.replaced_at >= now);
        assert_eq!(status.problem, None);
        status.took(&pair("c.pem", now, now + hour * 2));
        assert_eq!(status.lapse, Some(lapse));
        assert_eq!(status.path, Some(PathBuf::from("c.pem")));
        let held = status.held("client");
        assert_eq!(
            (held.kind, held.not_after, held.lapse),
            ("client", Some(now + hour * 2), Some(lapse))
        );
    }
}
