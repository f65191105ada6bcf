use oci_spec::distribution::{ParseError, Reference};
use proptest::prelude::*;

use super::parse;

/// oci-spec's own parse (its regular expression): the oracle the grammar must agree with.
fn oracle(reference: &str) -> Result<Reference, ParseError> {
    Reference::try_from(reference)
}

#[test]
fn references_parse_as_oci_spec_parses_them() {
    let hex64 = "0ff60967ceca3042053351fc38b45904cf3b06c7f700253ffbc05719f99a6628";
    let cases = [
        "busybox".to_owned(),
        "busybox:1.36".to_owned(),
        "library/busybox".to_owned(),
        "index.docker.io/library/busybox:1".to_owned(),
        "team/app:v2".to_owned(),
        "localhost/app".to_owned(),
        "localhost:5000/app".to_owned(),
        "registry:5000/a/b:c".to_owned(),
        "Registry.Example-1.com/a__b/c---d/e.f_g:_T-1.x".to_owned(),
        "a:5000".to_owned(),
        format!("busybox@sha256:{hex64}"),
        format!("busybox:1@sha256:{hex64}"),
        format!("busybox@sha256:{}", &hex64[..40]),
        format!("busybox@md5:{hex64}"),
        format!("busybox@sha2-5.x+y:{hex64}"),
        "busybox@sha256".to_owned(),
        String::new(),
        "Busybox".to_owned(),
        "busybox:".to_owned(),
        "busybox:-x".to_owned(),
        "busybox:.x".to_owned(),
        "a//b".to_owned(),
        "a/b/".to_owned(),
        "/a".to_owned(),
        ":latest".to_owned(),
        "a..b".to_owned(),
        "a___b".to_owned(),
        "a._b".to_owned(),
        "-a/b".to_owned(),
        "a-/b".to_owned(),
        "a:/b".to_owned(),
        "a:b:c".to_owned(),
        "a@b@c".to_owned(),
        format!("a:{}", "t".repeat(128)),
        format!("a:{}", "t".repeat(129)),
        format!("a/{}", "b".repeat(254)),
        "b".repeat(250),
        format!("x.io/{}", "b".repeat(256)),
    ];
    for case in cases {
        assert_eq!(parse(&case), oracle(&case), "{case:?}");
    }
}

/// A host component, a path component, a tag, a digest: pieces the grammar knows, and
/// pieces just outside it.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9]{1,3}([._-]{1,2}[a-z0-9]{1,3}){0,2}",
        "[a-zA-Z0-9][a-zA-Z0-9-]{0,3}(\\.[a-zA-Z0-9-]{1,4}){0,2}(:[0-9]{1,5})?",
        "(localhost|index\\.docker\\.io|docker\\.io|library)",
        "[A-Za-z0-9_][A-Za-z0-9_.-]{0,6}",
        "(sha256|sha384|sha512|md5|a[-_+.]b)",
        "[0-9a-fA-F]{30,66}",
        "[a-zA-Z0-9:/@._+-]{0,4}",
    ]
}

fn separator() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just("/"), Just(":"), Just("@"), Just("")]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// Any ASCII built of the grammar's pieces parses to the same reference, or fails
    /// with the same error, as oci-spec's regular expression.
    #[test]
    fn the_grammar_agrees_with_oci_spec(
        pieces in prop::collection::vec((piece(), separator()), 1..6),
    ) {
        let reference: String = pieces.iter().map(|(p, s)| format!("{p}{s}")).collect();
        prop_assert_eq!(parse(&reference), oracle(&reference), "{:?}", reference);
    }

    /// And any short string of the grammar's characters.
    #[test]
    fn the_grammar_agrees_with_oci_spec_on_any_string(reference in "[a-zA-Z0-9:/@._+-]{0,16}") {
        prop_assert_eq!(parse(&reference), oracle(&reference), "{:?}", reference);
    }
}
