//! V1: `clusterTrustBundle` sources, as kubelet's ClusterTrustBundle manager selects and
//! normalizes them.

use k8s_openapi::api::certificates::v1beta1::{ClusterTrustBundle, ClusterTrustBundleSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};

use super::*;

/// A PEM block of `der` (any bytes: the projection does not parse certificates).
fn block(der: &[u8]) -> String {
    use base64::Engine as _;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> =
        text.as_bytes().chunks(64).map(|l| std::str::from_utf8(l).unwrap()).collect();
    format!("-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n", lines.join("\n"))
}

fn bundle(
    name: &str,
    signer: Option<&str>,
    labels: &[(&str, &str)],
    anchors: &[&[u8]],
) -> ClusterTrustBundle {
    let labels: BTreeMap<String, String> =
        labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    ClusterTrustBundle {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(labels).filter(|l| !l.is_empty()),
            ..ObjectMeta::default()
        },
        spec: ClusterTrustBundleSpec {
            signer_name: signer.map(str::to_owned),
            trust_bundle: anchors.iter().map(|der| block(der)).collect(),
        },
    }
}

fn bundles(list: Vec<ClusterTrustBundle>) -> Resolved {
    let by_name: TrustBundles =
        list.into_iter().map(|b| (b.metadata.name.clone().unwrap(), b)).collect();
    let found = Resolution::Found(Object::ClusterTrustBundles(Arc::new(by_name)));
    resolved(vec![(Reference::ClusterTrustBundles, found)])
}

fn cluster() -> Resolved {
    bundles(vec![
        bundle("plain", None, &[], &[b"ca-one", b"ca-two"]),
        bundle("example.com:edge:a", Some("example.com/edge"), &[("site", "north")], &[b"edge-2"]),
        // The same anchor twice, across bundles: written once.
        bundle(
            "example.com:edge:b",
            Some("example.com/edge"),
            &[("site", "south")],
            &[b"edge-1", b"edge-2"],
        ),
        bundle("example.com:other:a", Some("example.com/other"), &[("site", "north")], &[b"other"]),
    ])
}

fn project(source: &str, resolved: &Resolved) -> Result<Vec<(String, String, u32)>, Error> {
    let volume = format!("{{name: p, projected: {{sources: [{{clusterTrustBundle: {source}}}]}}}}");
    let yaml = format!("spec: {{volumes: [{volume}], containers: [{{name: app, image: b}}]}}");
    payload_of(&yaml, resolved).map(|p| files(p.unwrap()))
}

#[test]
fn v1_a_trust_bundle_source_refers_to_every_bundle() {
    let pod = pod(
        "spec: {volumes: [{name: p, projected: {sources: [{clusterTrustBundle: {name: x, path: b}}]}}], containers: []}",
    );
    assert_eq!(volume_references(&pod), BTreeSet::from([Reference::ClusterTrustBundles]));
}

#[test]
fn v1_a_named_bundle_is_its_anchors_sorted() {
    let files = project("{name: plain, path: ca.pem}", &cluster()).unwrap();
    assert_eq!(files, owned(&[("ca.pem", &(block(b"ca-one") + &block(b"ca-two")), 0o644)]));
}

#[test]
fn v1_a_signer_takes_what_its_selector_selects_each_anchor_once() {
    let both = block(b"edge-1") + &block(b"edge-2");
    for (selector, want) in [
        ("{}", both.as_str()),
        ("{matchLabels: {site: south}}", &(block(b"edge-1") + &block(b"edge-2"))),
        ("{matchLabels: {site: north}}", &block(b"edge-2")),
        ("{matchExpressions: [{key: site, operator: In, values: [north, south]}]}", &both),
        ("{matchExpressions: [{key: site, operator: NotIn, values: [south]}]}", &block(b"edge-2")),
        ("{matchExpressions: [{key: site, operator: Exists}]}", &both),
    ] {
        let source =
            format!("{{signerName: example.com/edge, labelSelector: {selector}, path: ca}}");
        assert_eq!(
            project(&source, &cluster()).unwrap(),
            owned(&[("ca", want, 0o644)]),
            "{selector}"
        );
    }
}

#[test]
fn v1_nothing_selected_fails_unless_optional() {
    let cases = [
        (
            "{name: gone, path: ca}",
            "while getting ClusterTrustBundle: clustertrustbundle.certificates.k8s.io \"gone\" not found",
        ),
        // An unset selector selects nothing.
        (
            "{signerName: example.com/edge, path: ca}",
            "combination of signerName and labelSelector matched zero ClusterTrustBundles",
        ),
        (
            "{signerName: example.com/edge, labelSelector: {matchExpressions: [{key: site, operator: DoesNotExist}]}, path: ca}",
            "combination of signerName and labelSelector matched zero ClusterTrustBundles",
        ),
        (
            "{path: ca}",
            "ClusterTrustBundle projection requires either name or signerName to be set",
        ),
    ];
    for (source, message) in cases {
        assert_eq!(project(source, &cluster()).unwrap_err().to_string(), message, "{source}");
        if source.contains("name") {
            let optional = source.replacen("path:", "optional: true, path:", 1);
            assert_eq!(project(&optional, &cluster()).unwrap(), owned(&[("ca", "", 0o644)]));
        }
    }
}

#[test]
fn v1_bundles_not_known_yet_fail_even_if_optional() {
    let offline = resolved(vec![(
        Reference::ClusterTrustBundles,
        Resolution::Unavailable(
            "the API server is unreachable and the object is not cached".into(),
        ),
    )]);
    assert_eq!(
        project("{name: plain, optional: true, path: ca}", &offline).unwrap_err().to_string(),
        "ClusterTrustBundles are not known yet: the API server is unreachable and the object is \
         not cached"
    );
}

#[test]
fn v1_the_file_mode_follows_default_mode_and_fs_group() {
    let yaml = |context: &str| {
        format!(
            "spec: {{{context}volumes: [{{name: p, projected: {{defaultMode: 288, sources: \
             [{{clusterTrustBundle: {{name: plain, path: ca}}}}]}}}}], containers: []}}"
        )
    };
    let mode = |yaml: &str| payload_of(yaml, &cluster()).unwrap().unwrap()["ca"].mode;
    assert_eq!(mode(&yaml("")), 0o440);
    assert_eq!(mode(&yaml("securityContext: {fsGroup: 2000}, ")), 0o600);
}

#[test]
fn v1_label_selectors_as_the_api_machinery_reads_them() {
    let labels = BTreeMap::from([("tier".to_owned(), "edge".to_owned())]);
    let requirement = |operator: &str, values: &[&str]| LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "tier".into(),
            operator: operator.into(),
            values: Some(values.iter().map(|v| (*v).to_owned()).collect()),
        }]),
        ..LabelSelector::default()
    };
    assert_eq!(selects(None, Some(&labels)), Ok(false));
    assert_eq!(selects(Some(&LabelSelector::default()), None), Ok(true));
    assert_eq!(selects(Some(&requirement("NotIn", &["core"])), None), Ok(true));
    assert_eq!(selects(Some(&requirement("In", &["edge"])), Some(&labels)), Ok(true));
    assert_eq!(
        selects(Some(&requirement("In", &[])), Some(&labels)),
        Err("for 'in', 'notin' operators, values set can't be empty".into())
    );
    assert_eq!(
        selects(Some(&requirement("Exists", &["x"])), Some(&labels)),
        Err("values set must be empty for exists and does not exist".into())
    );
    assert_eq!(
        selects(Some(&requirement("Gt", &["1"])), Some(&labels)),
        Err("\"Gt\" is not a valid label selector operator".into())
    );
}
