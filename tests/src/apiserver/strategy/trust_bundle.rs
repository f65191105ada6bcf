//! V1: ClusterTrustBundles as the real registry validates them
//! (`ValidateClusterTrustBundle`, `ValidateClusterTrustBundleName`): a bundle of a signer
//! is named `<signer with '/' as ':'>:<subdomain>`, one of no signer has no `:` in its
//! name; `spec.signerName` is `<domain>/<path>` and immutable; `spec.trustBundle` holds
//! one or more distinct PEM `CERTIFICATE` blocks without headers, each an X.509 CA
//! certificate with valid basic constraints.

use serde_json::Value;
use x509_parser::prelude::FromDer as _;

use super::super::error::Cause;

/// The name's problem, if any (the real validator's words), for a bundle of `signer`.
pub fn name_problem(name: &str, signer: &str) -> Option<String> {
    if signer.is_empty() {
        if name.contains(':') {
            return Some(
                "ClusterTrustBundle without signer name must not have \":\" in its name".into(),
            );
        }
        return (!super::is_dns_subdomain(name)).then(|| super::NOT_A_DNS_SUBDOMAIN.to_owned());
    }
    let prefix = format!("{}:", signer.replace('/', ":"));
    match name.strip_prefix(&prefix) {
        None => Some(format!(
            "ClusterTrustBundle for signerName {signer} must be named with prefix {prefix}"
        )),
        Some(rest) if !super::is_dns_subdomain(rest) => Some(super::NOT_A_DNS_SUBDOMAIN.to_owned()),
        Some(_) => None,
    }
}

/// The causes of a bundle's `spec`.
pub fn validate(object: &Value, causes: &mut Vec<Cause>) {
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let signer = object.pointer("/spec/signerName").and_then(Value::as_str).unwrap_or_default();
    if let Some(problem) = name_problem(name, signer) {
        causes.push(Cause::invalid("metadata.name", format!("Invalid value: {name:?}: {problem}")));
    }
    if !signer.is_empty() && !is_signer_name(signer) {
        causes.push(Cause::invalid(
            "spec.signerName",
            format!(
                "Invalid value: {signer:?}: must be a fully qualified domain and path of the form \
                 'example.com/signer-name'"
            ),
        ));
    }
    let bundle = object.pointer("/spec/trustBundle").and_then(Value::as_str).unwrap_or_default();
    for problem in bundle_problems(bundle) {
        causes.push(Cause::invalid(
            "spec.trustBundle",
            format!("Invalid value: \"<value omitted>\": {problem}"),
        ));
    }
}

/// `<domain>/<path>`: a DNS subdomain with at least one dot, then a non-empty path.
fn is_signer_name(signer: &str) -> bool {
    let Some((domain, path)) = signer.split_once('/') else { return false };
    domain.contains('.') && super::is_dns_subdomain(domain) && !path.is_empty()
}

/// `validateTrustBundle`'s problems with `bundle`.
fn bundle_problems(bundle: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen: Vec<(Vec<u8>, Vec<usize>)> = Vec::new();
    for (i, block) in x509_parser::pem::Pem::iter_from_buffer(bundle.as_bytes()).enumerate() {
        let Ok(block) = block else { break };
        if block.label != "CERTIFICATE" {
            problems.push(format!("entry {i} has bad block type: {}", block.label));
            continue;
        }
        let Ok((_, certificate)) =
            x509_parser::certificate::X509Certificate::from_der(&block.contents)
        else {
            problems.push(format!("entry {i} does not parse as X.509"));
            continue;
        };
        match certificate.basic_constraints() {
            Ok(Some(constraints)) if constraints.value.ca => {}
            Ok(Some(_)) | Ok(None) => {
                problems.push(format!("entry {i} does not have the CA bit set"));
                continue;
            }
            Err(_) => {
                problems.push(format!("entry {i} has invalid basic constraints"));
                continue;
            }
        }
        match seen.iter_mut().find(|(der, _)| *der == block.contents) {
            Some((_, indices)) => indices.push(i),
            None => seen.push((block.contents.clone(), vec![i])),
        }
    }
    if !problems.is_empty() {
        return problems;
    }
    if seen.is_empty() {
        problems.push("at least one trust anchor must be provided".into());
    }
    for (_, indices) in seen.iter().filter(|(_, indices)| indices.len() > 1) {
        let indices: Vec<String> = indices.iter().map(usize::to_string).collect();
        problems.push(format!("duplicate trust anchor (indices [{}])", indices.join(" ")));
    }
    problems
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn certificate(ca: bool) -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        if ca {
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        }
        params.self_signed(&key).unwrap().pem()
    }

    fn causes(name: &str, signer: Option<&str>, bundle: &str) -> Vec<String> {
        let object = json!({"metadata": {"name": name}, "spec": {"signerName": signer, "trustBundle": bundle}});
        let mut causes = Vec::new();
        validate(&object, &mut causes);
        causes.into_iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
    }

    #[test]
    fn v1_bundles_are_validated_as_the_registry_does() {
        let ca = certificate(true);
        assert_eq!(causes("roots", None, &ca), Vec::<String>::new());
        assert_eq!(
            causes("example.com:edge:a", Some("example.com/edge"), &ca),
            Vec::<String>::new()
        );
        assert_eq!(
            causes("a:b", None, &ca),
            ["metadata.name: Invalid value: \"a:b\": ClusterTrustBundle without signer name must \
              not have \":\" in its name"]
        );
        assert_eq!(
            causes("edge-a", Some("example.com/edge"), &ca),
            ["metadata.name: Invalid value: \"edge-a\": ClusterTrustBundle for signerName \
              example.com/edge must be named with prefix example.com:edge:"]
        );
        let omitted = "spec.trustBundle: Invalid value: \"<value omitted>\": ";
        assert_eq!(
            causes("roots", None, ""),
            [format!("{omitted}at least one trust anchor must be provided")]
        );
        assert_eq!(
            causes("roots", None, &certificate(false)),
            [format!("{omitted}entry 0 does not have the CA bit set")]
        );
        assert_eq!(
            causes("roots", None, &[ca.as_str(), &certificate(true), &ca].concat()),
            [format!("{omitted}duplicate trust anchor (indices [0 2])")]
        );
    }
}
