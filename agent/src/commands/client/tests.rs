use super::*;

fn client(server: &str) -> Client {
    Client::new(&ClientArgs { server: Some(server.to_owned()), ..ClientArgs::default() }).unwrap()
}

#[test]
fn urls_escape_each_segment_and_keep_the_base_path() {
    let c = client("http://127.0.0.1:10250");
    let url = c.url(&["pods", "default", "web"], &[("follow", "true".to_owned())]);
    assert_eq!(url.as_str(), "http://127.0.0.1:10250/pods/default/web?follow=true");
    let c = client("https://gw.example:8443/outpost/");
    let url = c.url(&["pods", "a/b c"], &[]);
    assert_eq!(url.as_str(), "https://gw.example:8443/outpost/pods/a%2Fb%20c");
}

#[test]
fn a_server_that_is_not_an_http_url_is_refused() {
    for bad in ["127.0.0.1:10250", "ftp://x", "mailto:a@b"] {
        let args = ClientArgs { server: Some(bad.to_owned()), ..ClientArgs::default() };
        let e = Client::new(&args).unwrap_err();
        assert!(matches!(e, Error::Url { .. }), "{bad}: {e}");
    }
}

#[test]
fn the_server_comes_from_the_agent_config() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    std::fs::write(
        &config,
        format!("address: 0.0.0.0\nport: 10255\ntokenFile: {}\n", token.display()),
    )
    .unwrap();
    let args = ClientArgs { config: Some(config.clone()), ..ClientArgs::default() };
    let c = Client::new(&args).unwrap();
    assert_eq!(c.server().as_str(), "http://127.0.0.1:10255/", "every address: loopback");
    assert_eq!(c.credentials.token(), Some("s3cret"));
    let described = c.credentials.describe();
    assert!(described.contains(&token.display().to_string()), "{described}");
    assert!(described.contains("tokenFile in"), "{described}");
    assert!(!described.contains("s3cret"), "never the token: {described}");
    assert!(!format!("{c:?}").contains("s3cret"), "never the token in Debug");

    std::fs::write(&config, "listen: \"[::]:9000\"\n").unwrap();
    let c = Client::new(&args).unwrap();
    assert_eq!(c.server().as_str(), "http://[::1]:9000/");
    assert!(c.credentials.describe().contains("no bearer token"), "{}", c.credentials.describe());
}

#[test]
fn an_unreadable_token_file_is_an_error_from_the_flag_and_a_note_from_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let args = ClientArgs { token_file: Some(missing.clone()), ..ClientArgs::default() };
    let e = Client::new(&args).unwrap_err();
    assert!(matches!(e, Error::TokenFile { .. }), "{e}");
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, format!("tokenFile: {}\n", missing.display())).unwrap();
    let args = ClientArgs { config: Some(config), ..ClientArgs::default() };
    let c = Client::new(&args).unwrap();
    assert_eq!(c.credentials.token(), None);
    assert!(c.credentials.describe().contains("pass --token-file"), "{}", c.credentials.describe());
}

#[test]
fn error_messages_come_from_a_status_a_problem_or_the_text() {
    let status = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods \"x\" not found","reason":"NotFound","code":404}"#;
    assert_eq!(message(status).as_deref(), Some("pods \"x\" not found"));
    assert!(is_status(status));
    let problem = r#"{"error":"authentication required: send a token","details":[]}"#;
    assert_eq!(message(problem).as_deref(), Some("authentication required: send a token"));
    assert!(!is_status(problem));
    assert_eq!(message(" plain words\n").as_deref(), Some("plain words"));
    assert_eq!(message("  "), None);
    assert!(!is_status(""));
}

#[test]
fn pods_default_to_namespace_default() {
    assert_eq!(split_pod("kube-system/dns"), ("kube-system", "dns"));
    assert_eq!(split_pod("web"), ("default", "web"));
}
