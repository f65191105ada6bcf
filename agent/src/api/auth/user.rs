//! Who a caller is, as kubelet's authenticators say it (a `user.Info`): the subject of a
//! verified client certificate (common name the user, organizations the groups), the
//! user a TokenReview names, the on-box operator of the token file, or
//! `system:anonymous`. Every authenticated user is also in `system:authenticated`, as
//! kubelet's authenticator adds it.

use std::collections::BTreeMap;

/// The group every authenticated user is in.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The user and group of a caller without credentials (`--anonymous-auth`).
pub const ANONYMOUS: &str = "system:anonymous";
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user the token file's bearer authenticates: the box's operator, who is never
/// asked about on the API server (so the token keeps working offline).
pub const OPERATOR: &str = "outpost:token-file";

/// A caller's identity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    /// An authenticated user: `system:authenticated` added to its groups if missing.
    pub fn authenticated(
        name: String,
        uid: String,
        mut groups: Vec<String>,
        extra: BTreeMap<String, Vec<String>>,
    ) -> User {
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.to_owned());
        }
        User { name, uid, groups, extra }
    }

    pub fn anonymous() -> User {
        User {
            name: ANONYMOUS.to_owned(),
            groups: vec![UNAUTHENTICATED.to_owned()],
            ..User::default()
        }
    }

    pub fn operator() -> User {
        User::authenticated(OPERATOR.to_owned(), String::new(), Vec::new(), BTreeMap::new())
    }

    /// The user a client certificate names (DER): its subject's common name, its
    /// organizations as groups, as kube-apiserver's and kubelet's x509 authenticator.
    /// `None` for a certificate that does not parse or has no common name (the TLS
    /// layer verified its chain; this reads only its subject).
    pub fn from_certificate(der: &[u8]) -> Option<User> {
        let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
        let subject = certificate.subject();
        let name = subject.iter_common_name().next()?.as_str().ok()?.to_owned();
        let groups = subject
            .iter_organization()
            .filter_map(|o| o.as_str().ok())
            .map(str::to_owned)
            .collect();
        Some(User::authenticated(name, String::new(), groups, BTreeMap::new()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificate(cn: Option<&str>, orgs: &[&str]) -> Vec<u8> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            params.distinguished_name.push(rcgen::DnType::CommonName, cn);
        }
        // rcgen keeps one value per attribute type: a second O goes in under its OID
        // spelled as a custom type, which is the same attribute in the DER.
        for (i, org) in orgs.iter().enumerate() {
            let kind = match i {
                0 => rcgen::DnType::OrganizationName,
                _ => rcgen::DnType::CustomDnType(vec![2, 5, 4, 10]),
            };
            params.distinguished_name.push(kind, *org);
        }
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    /// N1: a client certificate's CN is the user and each O a group, as kubelet reads it.
    #[test]
    fn n1_certificate_subject_is_the_user_and_groups() {
        let der = certificate(Some("kube-apiserver-kubelet-client"), &["kubeadm:cluster-admins"]);
        let user = User::from_certificate(&der).unwrap();
        assert_eq!(user.name, "kube-apiserver-kubelet-client");
        assert_eq!(user.groups, ["kubeadm:cluster-admins", AUTHENTICATED]);
        let der = certificate(Some("ops"), &["a", "b"]);
        assert_eq!(User::from_certificate(&der).unwrap().groups, ["a", "b", AUTHENTICATED]);
        assert_eq!(User::from_certificate(&certificate(None, &["a"])), None);
        assert_eq!(User::from_certificate(b"not a certificate"), None);
    }

    #[test]
    fn authenticated_group_is_added_once_and_anonymous_is_unauthenticated() {
        let user = User::authenticated(
            "u".into(),
            String::new(),
            vec![AUTHENTICATED.into()],
            BTreeMap::new(),
        );
        assert_eq!(user.groups, [AUTHENTICATED]);
        assert_eq!(User::anonymous().groups, [UNAUTHENTICATED]);
        assert_eq!(User::anonymous().name, ANONYMOUS);
        assert_eq!(User::operator().groups, [AUTHENTICATED]);
    }
}
