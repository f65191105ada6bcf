use super::registry::auth::{Challenge, TokenResponse};
use super::registry::{Target, endpoint};
use super::*;

#[test]
fn pull_policies_decide_as_kubelet_does() {
    use PullDecision::*;
    let cases = [
        ("Always", true, Pull),
        ("Always", false, Pull),
        ("IfNotPresent", true, UsePresent),
        ("IfNotPresent", false, Pull),
        ("Never", true, UsePresent),
        ("Never", false, NeverPullAbsent),
        ("", true, UsePresent),
        ("", false, Pull),
    ];
    for (policy, present, want) in cases {
        assert_eq!(should_pull(policy, present), want, "{policy} present={present}");
    }
}

#[test]
fn parsed_references_are_split() {
    let digest = "sha256:0ff60967ceca3042053351fc38b45904cf3b06c7f700253ffbc05719f99a6628";
    let cases = [
        ("docker.io/library/busybox:1.36", "docker.io", "library/busybox", "1.36".to_owned()),
        ("127.0.0.1:5000/test/busybox:1", "127.0.0.1:5000", "test/busybox", "1".to_owned()),
        (&*format!("reg.example/a/b@{digest}"), "reg.example", "a/b", digest.to_owned()),
        (&*format!("reg.example/a:t@{digest}"), "reg.example", "a", digest.to_owned()),
    ];
    for (image, domain, repository, reference) in cases {
        let target = Target::from(&crate::image::reference::parse(image).unwrap());
        assert_eq!(
            (target.image.as_str(), target.domain.as_str(), target.repository.as_str()),
            (image, domain, repository)
        );
        assert_eq!(target.reference, reference, "{image}");
    }
}

#[test]
fn loopback_and_listed_registries_are_plain_http() {
    let insecure =
        ["reg.lan:5000".to_owned(), "http://other.lan/".to_owned(), "any.lan".to_owned()];
    let cases = [
        ("localhost", "http://localhost"),
        ("localhost:5000", "http://localhost:5000"),
        ("127.0.0.1:5000", "http://127.0.0.1:5000"),
        ("127.0.0.2", "http://127.0.0.2"),
        ("[::1]:5000", "http://[::1]:5000"),
        ("reg.lan:5000", "http://reg.lan:5000"),
        ("reg.lan:5001", "https://reg.lan:5001"),
        ("reg.lan", "https://reg.lan"),
        ("other.lan", "http://other.lan"),
        ("any.lan:1234", "http://any.lan:1234"),
        ("quay.io", "https://quay.io"),
        ("localhost.example.com", "https://localhost.example.com"),
        ("docker.io", "https://registry-1.docker.io"),
    ];
    for (domain, want) in cases {
        assert_eq!(endpoint(domain, &insecure), want, "{domain}");
    }
}

#[test]
fn challenges_are_parsed() {
    let bearer = r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull""#;
    assert_eq!(
        Challenge::parse(bearer),
        Some(Challenge::Bearer {
            realm: "https://auth.docker.io/token".to_owned(),
            service: Some("registry.docker.io".to_owned()),
            scope: Some("repository:library/busybox:pull".to_owned()),
        })
    );
    assert_eq!(
        Challenge::parse(r#"bearer  realm=https://t.example/token , scope="a:\"b\",c""#),
        Some(Challenge::Bearer {
            realm: "https://t.example/token".to_owned(),
            service: None,
            scope: Some(r#"a:"b",c"#.to_owned()),
        })
    );
    assert_eq!(Challenge::parse(r#"Basic realm="Registry Realm""#), Some(Challenge::Basic));
    assert_eq!(Challenge::parse("Basic"), Some(Challenge::Basic));
    assert_eq!(Challenge::parse(r#"Bearer service="no realm""#), None);
    assert_eq!(Challenge::parse(r#"Digest realm="x""#), None);
    assert_eq!(Challenge::parse(""), None);
}

#[test]
fn token_responses_carry_token_or_access_token() {
    let token = |json: &str| serde_json::from_str::<TokenResponse>(json).unwrap().token();
    assert_eq!(token(r#"{"token": "t", "expires_in": 300}"#).as_deref(), Some("t"));
    assert_eq!(token(r#"{"access_token": "a"}"#).as_deref(), Some("a"));
    assert_eq!(token(r#"{"token": "", "access_token": "a"}"#).as_deref(), Some("a"));
    assert_eq!(token("{}"), None);
}

#[test]
fn error_kinds_follow_the_variant() {
    let image = || "reg.example/a:1".to_owned();
    let registry = || "reg.example".to_owned();
    let cases = [
        (
            Error::NotFound { image: image(), registry: registry(), what: "manifest 1".to_owned() },
            PullErrorKind::NotFound,
        ),
        (
            Error::Unauthorized { image: image(), registry: registry(), detail: String::new() },
            PullErrorKind::Unauthorized,
        ),
        (
            Error::Status {
                image: image(),
                registry: registry(),
                what: String::new(),
                status: 503,
            },
            PullErrorKind::Unreachable,
        ),
        (
            Error::Digest {
                image: image(),
                registry: registry(),
                what: String::new(),
                expected: String::new(),
                actual: String::new(),
            },
            PullErrorKind::BadContent,
        ),
        (
            Error::Content {
                image: image(),
                registry: registry(),
                source: tree::Error::Platform { digest: String::new(), platform: String::new() },
            },
            PullErrorKind::BadContent,
        ),
        (
            Error::Store {
                image: image(),
                registry: registry(),
                source: store::Error::Read {
                    digest: String::new(),
                    source: std::io::Error::other("reset"),
                },
            },
            PullErrorKind::Unreachable,
        ),
        (
            Error::Store {
                image: image(),
                registry: registry(),
                source: store::Error::containerd(
                    "writing blob",
                    "sha256:00",
                    tonic::Status::failed_precondition("unexpected commit digest"),
                ),
            },
            PullErrorKind::BadContent,
        ),
        (
            Error::Store {
                image: image(),
                registry: registry(),
                source: store::Error::containerd(
                    "creating image",
                    "x",
                    tonic::Status::unavailable("down"),
                ),
            },
            PullErrorKind::Runtime,
        ),
    ];
    for (error, kind) in cases {
        assert_eq!(error.kind(), kind, "{error}");
        assert!(error.to_string().contains("reg.example/a:1"), "{error}");
    }
}
