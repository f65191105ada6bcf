//! V1: a projected volume's `clusterTrustBundle` source, as kubelet's ClusterTrustBundle
//! manager makes its file: the trust anchors of one bundle (`name`), or of every bundle of
//! `signerName` that `labelSelector` selects (unset selects none, empty selects all),
//! each certificate once, re-encoded as `CERTIFICATE` blocks. kubelet shuffles them once
//! per start; they are sorted here, so that a restart does not rewrite the file.
//!
//! The bundles come from the node's view of every ClusterTrustBundle (kubelet's informer,
//! the agent's list+watch), resolved as [`Reference::ClusterTrustBundles`].

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use k8s_openapi::api::certificates::v1beta1::ClusterTrustBundle;
use k8s_openapi::api::core::v1::ClusterTrustBundleProjection;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;

use super::{Error, Object, Reference, Resolved, lookup, wrong_kind};

/// Every ClusterTrustBundle the node knows, by name.
pub type TrustBundles = BTreeMap<String, ClusterTrustBundle>;

/// The file of `source`: the PEM trust anchors it selects; empty when nothing is
/// selected and the source is `optional`.
pub fn anchors(
    resolved: &Resolved,
    source: &ClusterTrustBundleProjection,
) -> Result<Vec<u8>, Error> {
    let unavailable =
        |why: String| Error::TrustAnchors(format!("ClusterTrustBundles are not known yet: {why}"));
    let bundles = match lookup(resolved, &Reference::ClusterTrustBundles).map_err(unavailable)? {
        Some(Object::ClusterTrustBundles(bundles)) => bundles,
        Some(other) => return Err(unavailable(wrong_kind(other))),
        // The list answered with nothing: no bundle exists.
        None => &Default::default(),
    };
    let optional = source.optional == Some(true);
    let selected: Vec<&ClusterTrustBundle> = if let Some(name) = &source.name {
        match bundles.get(name) {
            Some(bundle) => vec![bundle],
            None if optional => return Ok(Vec::new()),
            None => {
                return Err(Error::TrustAnchors(format!(
                    "while getting ClusterTrustBundle: clustertrustbundle.certificates.k8s.io \
                     {name:?} not found"
                )));
            }
        }
    } else if let Some(signer) = &source.signer_name {
        let selector = source.label_selector.as_ref();
        let mut matching = Vec::new();
        for bundle in bundles.values() {
            let labels = bundle.metadata.labels.as_ref();
            if bundle.spec.signer_name.as_deref() == Some(signer.as_str())
                && selects(selector, labels).map_err(|why| {
                    Error::TrustAnchors(format!("while parsing label selector: {why}"))
                })?
            {
                matching.push(bundle);
            }
        }
        if matching.is_empty() {
            if optional {
                return Ok(Vec::new());
            }
            return Err(Error::TrustAnchors(
                "combination of signerName and labelSelector matched zero ClusterTrustBundles"
                    .to_owned(),
            ));
        }
        matching
    } else {
        return Err(Error::TrustAnchors(
            "ClusterTrustBundle projection requires either name or signerName to be set".to_owned(),
        ));
    };
    Ok(normalize(&selected))
}

/// Each certificate of `bundles` once, in DER order, as PEM.
fn normalize(bundles: &[&ClusterTrustBundle]) -> Vec<u8> {
    let mut anchors = BTreeSet::new();
    for bundle in bundles {
        let certificates = CertificateDer::pem_slice_iter(bundle.spec.trust_bundle.as_bytes());
        // As Go's pem.Decode, what does not parse ends the bundle (the API server
        // accepted only well-formed ones).
        anchors.extend(certificates.map_while(Result::ok).map(|der| der.to_vec()));
    }
    let mut pem = String::new();
    for der in anchors {
        let text = base64::engine::general_purpose::STANDARD.encode(der);
        pem.push_str("-----BEGIN CERTIFICATE-----\n");
        for line in text.as_bytes().chunks(64) {
            pem.push_str(&String::from_utf8_lossy(line));
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
    }
    pem.into_bytes()
}

/// Whether `selector` selects `labels` (`metav1.LabelSelectorAsSelector`): an unset
/// selector selects nothing, an empty one everything; `Err` for an operator or values
/// it cannot take.
pub fn selects(
    selector: Option<&LabelSelector>,
    labels: Option<&BTreeMap<String, String>>,
) -> Result<bool, String> {
    let Some(selector) = selector else { return Ok(false) };
    let label = |key: &str| labels.and_then(|l| l.get(key));
    let mut selected = true;
    for (key, value) in selector.match_labels.iter().flatten() {
        selected &= label(key) == Some(value);
    }
    for requirement in selector.match_expressions.iter().flatten() {
        let values = requirement.values.as_deref().unwrap_or_default();
        let key = requirement.key.as_str();
        let holds = match requirement.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                return Err("for 'in', 'notin' operators, values set can't be empty".to_owned());
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                return Err("values set must be empty for exists and does not exist".to_owned());
            }
            "In" => label(key).is_some_and(|v| values.contains(v)),
            "NotIn" => label(key).is_none_or(|v| !values.contains(v)),
            "Exists" => label(key).is_some(),
            "DoesNotExist" => label(key).is_none(),
            other => return Err(format!("{other:?} is not a valid label selector operator")),
        };
        selected &= holds;
    }
    Ok(selected)
}
