//! The cluster signer (kube-controller-manager's `csrsigning` controller with
//! `--cluster-signing-cert-file`) and the x509 client-certificate authenticator, both
//! with the cluster CA: the CA of the server's TLS, or a generated one without TLS.
//!
//! The signer issues an approved request's certificate for the subject and SANs the
//! request asks for, with the key usages of `spec.usages`, for the signing duration
//! (`--cluster-signing-duration`, a year by default) or the shorter
//! `spec.expirationSeconds` (at least 600 s, as the real signer). Test-only deviation:
//! the duration can be set to seconds ([`Config::signing_duration`](super::Config)) so
//! that rotations happen during a test; then `expirationSeconds` has no floor and the
//! certificate is not backdated (the real signer backdates `notBefore` by 5 minutes,
//! which would make a lifetime of seconds due for renewal at once).
//!
//! The authenticator takes a certificate the cluster CA signed, valid now and with the
//! client-auth usage: the user is its CN, the groups its Os and
//! `system:authenticated`. Any other certificate (expired, another CA's) is a 401.

use std::time::Duration;

use rcgen::{
    CertificateSigningRequestParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SerialNumber,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::json;

use super::authn::User;
use super::error::{Error, Result};

/// A year: kube-controller-manager's default `--cluster-signing-duration`.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// The shortest `expirationSeconds` the real signer honours.
const MIN_EXPIRATION: Duration = Duration::from_secs(600);

/// How far the real signer backdates `notBefore` (clock skew).
const BACKDATE: Duration = Duration::from_secs(300);

/// The cluster CA's signing key and certificate.
pub struct CertificateSigner {
    issuer: Issuer<'static, KeyPair>,
    ca_der: Vec<u8>,
    duration: Duration,
}

impl std::fmt::Debug for CertificateSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateSigner")
            .field("duration", &self.duration)
            .finish_non_exhaustive()
    }
}

impl CertificateSigner {
    /// The signer of the CA `ca_pem` (whose key `issuer` holds).
    pub fn new(
        issuer: Issuer<'static, KeyPair>,
        ca_pem: &str,
        duration: Duration,
    ) -> std::result::Result<CertificateSigner, String> {
        let ca = CertificateDer::from_pem_slice(ca_pem.as_bytes())
            .map_err(|e| format!("the cluster CA is not a PEM certificate: {e}"))?;
        Ok(CertificateSigner { issuer, ca_der: ca.to_vec(), duration })
    }

    /// The certificate (PEM) for the PEM certificate request `request`, with `usages`
    /// (the API's names) for the signing duration or `expiration_seconds`. The error
    /// says why the request cannot be signed (it becomes a `Failed` condition).
    pub fn sign(
        &self,
        request: &str,
        usages: &[String],
        expiration_seconds: Option<i64>,
    ) -> std::result::Result<String, String> {
        let mut csr = CertificateSigningRequestParams::from_pem(request)
            .map_err(|e| format!("the request is not a valid PEM certificate request: {e}"))?;
        let test_duration = self.duration < MIN_EXPIRATION;
        let mut lifetime = self.duration;
        if let Some(seconds) = expiration_seconds.and_then(|s| u64::try_from(s).ok()) {
            let asked = Duration::from_secs(seconds);
            let asked = if test_duration { asked } else { asked.max(MIN_EXPIRATION) };
            lifetime = lifetime.min(asked);
        }
        let backdate = if test_duration { Duration::ZERO } else { BACKDATE };
        let now = time::OffsetDateTime::now_utc();
        let params = &mut csr.params;
        params.not_before = now - backdate;
        params.not_after = now + lifetime;
        params.is_ca = IsCa::ExplicitNoCa;
        params.serial_number = Some(SerialNumber::from_slice(&fastrand::u64(1..).to_be_bytes()));
        params.key_usages = Vec::new();
        params.extended_key_usages = Vec::new();
        for usage in usages {
            match usage.as_str() {
                "digital signature" => params.key_usages.push(KeyUsagePurpose::DigitalSignature),
                "key encipherment" => params.key_usages.push(KeyUsagePurpose::KeyEncipherment),
                "client auth" => {
                    params.extended_key_usages.push(ExtendedKeyUsagePurpose::ClientAuth)
                }
                "server auth" => {
                    params.extended_key_usages.push(ExtendedKeyUsagePurpose::ServerAuth)
                }
                other => return Err(format!("usage {other:?} is not supported by this signer")),
            }
        }
        let cert = csr.signed_by(&self.issuer).map_err(|e| format!("cannot sign: {e}"))?;
        Ok(cert.pem())
    }

    /// Who the client certificate `der` says the request is from; 401 for one the
    /// cluster CA did not sign, one not valid now, or one without the client-auth usage.
    pub fn authenticate(&self, der: &[u8]) -> Result<User> {
        let (_, ca) =
            x509_parser::parse_x509_certificate(&self.ca_der).map_err(|_| Error::Unauthorized)?;
        let (_, cert) =
            x509_parser::parse_x509_certificate(der).map_err(|_| Error::Unauthorized)?;
        cert.verify_signature(Some(ca.public_key())).map_err(|_| Error::Unauthorized)?;
        if !cert.validity().is_valid() {
            return Err(Error::Unauthorized);
        }
        let client_auth = matches!(cert.extended_key_usage(), Ok(Some(eku)) if eku.value.client_auth || eku.value.any);
        if !client_auth {
            return Err(Error::Unauthorized);
        }
        let subject = cert.subject();
        let name = subject
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .ok_or(Error::Unauthorized)?;
        let mut groups: Vec<&str> =
            subject.iter_organization().filter_map(|o| o.as_str().ok()).collect();
        groups.push("system:authenticated");
        Ok(User(json!({ "username": name, "groups": groups })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType};

    fn signer(duration: Duration) -> CertificateSigner {
        let (pem, issuer) = super::super::tls::ca_only().unwrap();
        CertificateSigner::new(issuer, &pem, duration).unwrap()
    }

    fn request(cn: &str, o: &str) -> (String, KeyPair) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.distinguished_name.push(DnType::OrganizationName, o);
        (params.serialize_request(&key).unwrap().pem().unwrap(), key)
    }

    fn der(pem: &str) -> Vec<u8> {
        CertificateDer::from_pem_slice(pem.as_bytes()).unwrap().to_vec()
    }

    /// J1: an issued client certificate authenticates as its CN in its Os.
    #[test]
    fn j1_issued_client_certificate_authenticates_as_its_subject() {
        let signer = signer(DEFAULT_DURATION);
        let (csr, _) = request("system:node:edge-1", "system:nodes");
        let usages = ["digital signature".to_owned(), "client auth".to_owned()];
        let cert = signer.sign(&csr, &usages, None).unwrap();
        let user = signer.authenticate(&der(&cert)).unwrap();
        assert_eq!(user.0["username"], "system:node:edge-1");
        assert_eq!(user.0["groups"], json!(["system:nodes", "system:authenticated"]));
        // A serving certificate is no client credential.
        let serving = signer.sign(&csr, &["server auth".to_owned()], None).unwrap();
        assert_eq!(signer.authenticate(&der(&serving)), Err(Error::Unauthorized));
        // Nor is a certificate of another CA.
        let other = self::signer(DEFAULT_DURATION).sign(&csr, &usages, None).unwrap();
        assert_eq!(signer.authenticate(&der(&other)), Err(Error::Unauthorized));
    }

    /// J2: the lifetime is the signing duration or the shorter expirationSeconds, and an
    /// expired certificate is refused.
    #[test]
    fn j2_lifetime_and_expiry() {
        let lifetime = |signer: &CertificateSigner, asked: Option<i64>| {
            let (csr, _) = request("system:node:edge-1", "system:nodes");
            let pem = signer.sign(&csr, &["client auth".to_owned()], asked).unwrap();
            let der = der(&pem);
            let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
            let v = cert.validity();
            (v.not_after.timestamp() - v.not_before.timestamp(), der)
        };
        let year = signer(DEFAULT_DURATION);
        // Backdated by 5 minutes; expirationSeconds has a floor of 600 s.
        assert_eq!(lifetime(&year, None).0, 365 * 24 * 3600 + 300);
        assert_eq!(lifetime(&year, Some(3600)).0, 3600 + 300);
        assert_eq!(lifetime(&year, Some(60)).0, 600 + 300);
        let short = signer(Duration::from_secs(2));
        assert_eq!(lifetime(&short, None).0, 2);
        assert_eq!(lifetime(&short, Some(1)).0, 1);
        let (_, der) = lifetime(&short, Some(1));
        std::thread::sleep(Duration::from_millis(2100));
        assert_eq!(short.authenticate(&der), Err(Error::Unauthorized));
    }
}
