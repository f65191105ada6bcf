use base64::Engine as _;
use proptest::prelude::*;

use super::*;

fn auth(user: &str, password: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

fn cred(user: &str, password: &str) -> Credential {
    Credential { username: user.to_owned(), password: password.to_owned(), identity_token: None }
}

fn keyring(entries: &[(&str, &str)]) -> Keyring {
    let auths: serde_json::Map<String, serde_json::Value> = entries
        .iter()
        .map(|(key, user)| ((*key).to_owned(), serde_json::json!({ "auth": auth(user, "pw") })))
        .collect();
    let json = serde_json::json!({ "auths": auths });
    Keyring::from_docker_config(json.to_string().as_bytes()).unwrap()
}

fn users(keyring: &Keyring, image: &str) -> Vec<String> {
    keyring.lookup(image).into_iter().map(|c| c.username).collect()
}

#[test]
fn entries_take_auth_or_username_and_password() {
    let json = format!(
        r#"{{"auths": {{
            "a.example": {{"auth": "{}"}},
            "b.example": {{"username": "bob", "password": "pw:with:colons"}},
            "c.example": {{"auth": "{}", "username": "ignored", "password": "ignored"}},
            "d.example": {{"identitytoken": "refresh-me"}},
            "e.example": {{"email": "nobody@example.com"}}
        }}}}"#,
        auth("alice", "s3cret:x"),
        auth("carol", "pw"),
    );
    let keyring = Keyring::from_docker_config(json.as_bytes()).unwrap();
    assert_eq!(keyring.lookup("a.example/app"), [cred("alice", "s3cret:x")]);
    assert_eq!(keyring.lookup("b.example/app"), [cred("bob", "pw:with:colons")]);
    assert_eq!(keyring.lookup("c.example/app"), [cred("carol", "pw")]);
    assert_eq!(
        keyring.lookup("d.example/app"),
        [Credential { identity_token: Some("refresh-me".to_owned()), ..Credential::default() }]
    );
    assert!(keyring.lookup("e.example/app").is_empty(), "an entry without credentials");
}

#[test]
fn the_older_dockercfg_form_is_read_too() {
    let json = format!(r#"{{"reg.example:5000": {{"auth": "{}"}}}}"#, auth("u", "p"));
    let keyring = Keyring::from_docker_config(json.as_bytes()).unwrap();
    assert_eq!(keyring.lookup("reg.example:5000/team/app:1"), [cred("u", "p")]);
}

#[test]
fn bad_configs_are_errors_that_name_the_registry_but_no_secret() {
    assert!(matches!(Keyring::from_docker_config(b"[]"), Err(Error::Json(_))));
    assert!(matches!(Keyring::from_docker_config(b"not json"), Err(Error::Json(_))));
    let no_colon = base64::engine::general_purpose::STANDARD.encode("justuser");
    for bad in ["%%%not-base64", no_colon.as_str()] {
        let json = format!(r#"{{"auths": {{"reg.example": {{"auth": "{bad}"}}}}}}"#);
        let error = Keyring::from_docker_config(json.as_bytes()).unwrap_err();
        assert!(error.to_string().contains("reg.example"), "{error}");
        assert!(!error.to_string().contains(bad), "{error}");
    }
}

#[test]
fn debug_output_redacts_secrets() {
    let json = r#"{"auths": {"reg.example": {"username": "u", "password": "hunter2", "identitytoken": "tok3n"}}}"#;
    let keyring = Keyring::from_docker_config(json.as_bytes()).unwrap();
    let shown = format!("{keyring:?} {:?}", keyring.lookup("reg.example/a"));
    assert!(shown.contains("reg.example") && shown.contains("\"u\""), "{shown}");
    assert!(!shown.contains("hunter2") && !shown.contains("tok3n"), "{shown}");
}

#[test]
fn keys_may_carry_scheme_port_and_path() {
    let keyring = keyring(&[
        ("https://reg.example", "scheme"),
        ("reg.example:5000", "port"),
        ("http://reg.example/team/", "path"),
        ("reg.example/v2/", "v2"),
    ]);
    assert_eq!(users(&keyring, "reg.example/team/app:1"), ["path", "scheme", "v2"]);
    assert_eq!(users(&keyring, "reg.example/other/app"), ["scheme", "v2"]);
    assert_eq!(users(&keyring, "reg.example:5000/app"), ["port"]);
    assert!(users(&keyring, "reg.example:5001/app").is_empty());
    assert!(users(&keyring, "other.example/app").is_empty());
}

#[test]
fn more_specific_paths_come_first() {
    let keyring =
        keyring(&[("reg.example", "host"), ("reg.example/a/b", "deep"), ("reg.example/a", "mid")]);
    assert_eq!(users(&keyring, "reg.example/a/b/c@sha256:00"), ["deep", "mid", "host"]);
}

#[test]
fn host_globs_match_one_label_each() {
    let keyring = keyring(&[("*.example.com", "star"), ("reg?.example.com", "question")]);
    assert_eq!(users(&keyring, "reg1.example.com/app"), ["question", "star"]);
    assert_eq!(users(&keyring, "other.example.com/app"), ["star"]);
    assert!(users(&keyring, "example.com/app").is_empty());
    assert!(users(&keyring, "a.b.example.com/app").is_empty());
}

#[test]
fn docker_hub_names_are_equivalent() {
    for key in ["docker.io", "index.docker.io", "https://index.docker.io/v1/"] {
        let keyring = keyring(&[(key, "hub")]);
        for image in [
            "busybox",
            "library/busybox:1",
            "docker.io/library/busybox",
            "index.docker.io/team/app",
        ] {
            assert_eq!(users(&keyring, image), ["hub"], "key {key}, image {image}");
        }
        assert!(users(&keyring, "quay.io/busybox").is_empty(), "key {key}");
    }
}

#[test]
fn merge_keeps_both_and_drops_duplicates() {
    let mut pod = keyring(&[("reg.example", "pod")]);
    let node = keyring(&[("reg.example", "node"), ("*.example", "glob")]);
    pod.merge(node);
    assert_eq!(users(&pod, "reg.example/app"), ["pod", "node", "glob"]);
    let mut twice = keyring(&[("reg.example", "same")]);
    twice.merge(keyring(&[("reg.example", "same")]));
    assert_eq!(users(&twice, "reg.example/app"), ["same"]);
}

proptest! {
    #[test]
    fn a_host_key_matches_every_repository_on_that_host(
        host in "[a-z]{1,8}\\.[a-z]{2,3}",
        path in "[a-z0-9]{1,8}(/[a-z0-9]{1,8}){0,2}",
        tag in "[a-z0-9]{1,6}",
    ) {
        let keyring = keyring(&[(host.as_str(), "u")]);
        prop_assert_eq!(users(&keyring, &format!("{host}/{path}:{tag}")), ["u"]);
    }

    #[test]
    fn a_literal_label_glob_matches_only_itself(label in "[a-z0-9-]{1,10}", other in "[a-z0-9-]{1,10}") {
        prop_assert!(glob_matches(&label, &label));
        prop_assert!(glob_matches("*", &other));
        prop_assert_eq!(glob_matches(&label, &other), label == other);
    }
}
