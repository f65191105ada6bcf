//! J1: bootstrap tokens, CA pins and cluster-info's detached JWS.

use proptest::prelude::*;

use super::*;

fn token() -> Token {
    "07401b.f395accd246ae52d".parse().unwrap()
}

#[test]
fn j1_token_parses_id_and_secret() {
    let token = token();
    assert_eq!(token.id(), "07401b");
    assert_eq!(token.secret(), "f395accd246ae52d");
    assert_eq!(token.bearer(), "07401b.f395accd246ae52d");
}

#[test]
fn j1_token_never_shows_its_secret() {
    let token = token();
    assert_eq!(format!("{token:?}"), "Token(07401b.<secret>)");
    assert_eq!(token.to_string(), "07401b.<secret>");
}

#[test]
fn j1_token_errors_say_what_is_wrong() {
    let reason = |s: &str| match s.parse::<Token>() {
        Err(Error::Token { reason }) => reason,
        other => panic!("{s:?}: {other:?}"),
    };
    assert_eq!(reason("07401bf395accd246ae52d"), "there is no '.' between the id and the secret");
    assert_eq!(reason("0740.f395accd246ae52d"), "the id has 4 characters, not 6");
    assert_eq!(reason("07401b.f395accd"), "the secret has 8 characters, not 16");
    assert_eq!(
        reason("07401B.f395accd246ae52d"),
        "the id has 'B'; only lowercase letters and digits may be used"
    );
    assert_eq!(
        reason("07401b.f395accd246ae52d.x"),
        "the secret has '.'; only lowercase letters and digits may be used"
    );
    assert_eq!(reason("07401b."), "the secret has 0 characters, not 16");
    let message = "x".parse::<Token>().unwrap_err().to_string();
    assert!(message.contains("ID.SECRET"), "{message}");
}

#[test]
fn j1_pin_parses_and_prints_lowercase() {
    let hex = "AB".repeat(32);
    let pin: Pin = format!("sha256:{hex}").parse().unwrap();
    assert_eq!(pin.to_string(), format!("sha256:{}", hex.to_lowercase()));
    let upper: Pin = format!("SHA256:{hex}").parse().unwrap();
    assert_eq!(pin, upper);
}

#[test]
fn j1_pin_errors_say_what_is_wrong() {
    let reason = |s: &str| match s.parse::<Pin>() {
        Err(Error::Pin { given, reason }) => {
            assert_eq!(given, s);
            reason
        }
        other => panic!("{s:?}: {other:?}"),
    };
    assert_eq!(reason(&"ab".repeat(32)), "there is no \"sha256:\" before the hash");
    assert_eq!(reason(&format!("md5:{}", "ab".repeat(32))), "only sha256 hashes are supported");
    assert_eq!(reason("sha256:abcd"), "the hash has 4 hex digits, not 64");
    assert_eq!(
        reason(&format!("sha256:{}zz", "ab".repeat(31))),
        "the hash has a character that is not a hex digit"
    );
    // 64 bytes but not 64 characters: no slicing inside a character.
    assert_eq!(
        reason(&format!("sha256:é{}", "a".repeat(62))),
        "the hash has a character that is not a hex digit"
    );
}

/// A CA made here, its PEM and the DER of its SubjectPublicKeyInfo.
fn ca() -> (String, Vec<u8>) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), rcgen::PublicKeyData::subject_public_key_info(&key))
}

#[test]
fn j1_ca_pin_is_the_sha256_of_the_spki() {
    use sha2::Digest as _;
    let (pem, spki) = ca();
    let expected: String = sha2::Sha256::digest(&spki).iter().map(|b| format!("{b:02x}")).collect();
    let pins = ca_pins(pem.as_bytes()).unwrap();
    assert_eq!(pins.len(), 1);
    assert_eq!(pins[0].to_string(), format!("sha256:{expected}"));
    assert_eq!(pins[0], Pin::of_spki(&spki));
}

#[test]
fn j1_ca_pins_of_a_bundle_in_order() {
    let (first, first_spki) = ca();
    let (second, second_spki) = ca();
    let bundle = format!("{first}{second}");
    let pins = ca_pins(bundle.as_bytes()).unwrap();
    assert_eq!(pins, [Pin::of_spki(&first_spki), Pin::of_spki(&second_spki)]);
}

#[test]
fn j1_ca_pins_refuse_what_is_no_certificate() {
    assert!(matches!(ca_pins(b""), Err(Error::Certificate { .. })));
    assert!(matches!(ca_pins(b"not pem"), Err(Error::Certificate { .. })));
    let garbage = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    let Err(Error::Certificate { reason }) = ca_pins(garbage.as_bytes()) else { panic!() };
    assert!(reason.starts_with("bad certificate"), "{reason}");
}

#[test]
fn j1_check_pins_takes_any_pinned_key() {
    let (a, b, c) = (Pin::of_spki(b"a"), Pin::of_spki(b"b"), Pin::of_spki(b"c"));
    assert_eq!(check_pins(&[a, b], &[c, b]), Ok(b));
    let Err(error) = check_pins(&[a], &[b, c]) else { panic!() };
    assert_eq!(error, Error::PinMismatch { found: a.to_string(), pinned: format!("{b}, {c}") });
    let message = error.to_string();
    assert!(message.contains("hash") && message.contains(&a.to_string()), "{message}");
}

#[test]
fn j1_jws_is_hs256_over_the_content_with_the_secret() {
    // Computed apart from this code, with Python's hmac and base64 modules.
    let content = "apiVersion: v1\nkind: Config\n";
    assert_eq!(
        jws::sign(content, &token()),
        "eyJhbGciOiJIUzI1NiIsImtpZCI6IjA3NDAxYiJ9..V7vfbveur77TnlLQz-hsORPxM3IuWz8GI4hOaPAzkdk"
    );
    let header = "eyJhbGciOiJIUzI1NiIsImtpZCI6IjA3NDAxYiJ9";
    assert_eq!(
        String::from_utf8(
            base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, header)
                .unwrap()
        )
        .unwrap(),
        r#"{"alg":"HS256","kid":"07401b"}"#
    );
}

#[test]
fn j1_jws_verify_names_what_failed() {
    let content = "kubeconfig";
    let signed = jws::sign(content, &token());
    assert_eq!(jws::verify(&signed, content, &token()), Ok(()));
    let other: Token = "07401b.0000000000000000".parse().unwrap();
    assert_eq!(
        jws::verify(&signed, content, &other),
        Err(Error::JwsMismatch { id: "07401b".into() })
    );
    let other_id: Token = "abcdef.f395accd246ae52d".parse().unwrap();
    assert!(matches!(jws::verify(&signed, content, &other_id), Err(Error::JwsMalformed { .. })));
    for bad in ["", "a.b", "a..b..c", &signed.replacen("..", ".x.", 1), &format!("{signed}foo")] {
        assert!(jws::verify(bad, content, &token()).is_err(), "{bad:?}");
    }
    let message = jws::verify(&signed, "changed", &token()).unwrap_err().to_string();
    assert!(message.contains("signature"), "{message}");
}

#[test]
fn j1_jws_key_name() {
    assert_eq!(jws_key("07401b"), "jws-kubeconfig-07401b");
}

fn any_token() -> impl Strategy<Value = Token> {
    ("[a-z0-9]{6}", "[a-z0-9]{16}").prop_map(|(id, secret)| Token::new(&id, &secret).unwrap())
}

proptest! {
    #[test]
    fn j1_jws_round_trips(content in ".*", token in any_token()) {
        let signed = jws::sign(&content, &token);
        prop_assert_eq!(jws::verify(&signed, &content, &token), Ok(()));
    }

    #[test]
    fn j1_jws_any_tampered_byte_fails(
        content in ".*",
        token in any_token(),
        at in any::<prop::sample::Index>(),
        with in any::<u8>(),
    ) {
        let mut signed = jws::sign(&content, &token).into_bytes();
        let at = at.index(signed.len());
        prop_assume!(signed[at] != with);
        signed[at] = with;
        let signed = String::from_utf8_lossy(&signed);
        prop_assert!(jws::verify(&signed, &content, &token).is_err());
    }

    #[test]
    fn j1_jws_other_content_or_secret_fails(
        content in ".*",
        other in ".*",
        token in any_token(),
        secret in "[a-z0-9]{16}",
    ) {
        let signed = jws::sign(&content, &token);
        prop_assume!(content != other);
        prop_assert!(jws::verify(&signed, &other, &token).is_err());
        let wrong = Token::new(token.id(), &secret).unwrap();
        prop_assume!(wrong != token);
        prop_assert_eq!(
            jws::verify(&signed, &content, &wrong),
            Err(Error::JwsMismatch { id: token.id().to_owned() })
        );
    }

    #[test]
    fn j1_token_round_trips(token in any_token()) {
        prop_assert_eq!(token.bearer().parse::<Token>(), Ok(token));
    }

    #[test]
    fn j1_token_parse_never_panics(s in ".*") {
        let _ = s.parse::<Token>();
    }

    #[test]
    fn j1_pin_round_trips(bytes in any::<[u8; 32]>()) {
        let pin = Pin::of_spki(&bytes);
        prop_assert_eq!(pin.to_string().parse::<Pin>(), Ok(pin));
    }

    #[test]
    fn j1_pin_parse_never_panics(s in ".*") {
        let _ = s.parse::<Pin>();
    }
}
