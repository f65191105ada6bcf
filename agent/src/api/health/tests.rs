use super::*;

fn check(name: &str, passed: bool, detail: &str) -> Check {
    Check { name: name.into(), passed, detail: detail.into() }
}

fn checks() -> Vec<Check> {
    vec![
        check("source-file", true, "live"),
        check("source-api", false, "never seen (failing: connection refused)"),
        check("runtime", true, "containerd connected"),
    ]
}

#[test]
fn the_query_takes_verbose_and_repeated_excludes() {
    assert_eq!(Query::parse(None), Query::default());
    assert_eq!(Query::parse(Some("verbose")), Query { verbose: true, exclude: vec![] });
    assert_eq!(
        Query::parse(Some("exclude=runtime&verbose=1&exclude=source-api&other=x")),
        Query { verbose: true, exclude: vec!["runtime".into(), "source-api".into()] }
    );
}

#[test]
fn plain_and_passing_is_just_ok() {
    let all = [check("source-file", true, "live"), check("runtime", true, "containerd connected")];
    assert_eq!(report("readyz", &all, &Query::default()), (StatusCode::OK, "ok".into()));
    assert_eq!(report("readyz", &[], &Query::default()), (StatusCode::OK, "ok".into()));
}

#[test]
fn plain_and_failing_lists_only_the_failing_checks() {
    let (status, body) = report("readyz", &checks(), &Query::default());
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        body,
        "[-]source-api failed: never seen (failing: connection refused)\nreadyz check failed\n"
    );
}

#[test]
fn verbose_lists_every_check_and_the_verdict() {
    let query = Query { verbose: true, exclude: vec![] };
    let (status, body) = report("readyz", &checks(), &query);
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        body,
        "[+]source-file ok: live\n\
         [-]source-api failed: never seen (failing: connection refused)\n\
         [+]runtime ok: containerd connected\n\
         readyz check failed\n"
    );
}

#[test]
fn an_excluded_check_does_not_count() {
    let query = Query { verbose: false, exclude: vec!["source-api".into()] };
    assert_eq!(report("readyz", &checks(), &query), (StatusCode::OK, "ok".into()));
    let query = Query { verbose: true, exclude: vec!["source-api".into(), "nope".into()] };
    let (status, body) = report("healthz", &checks(), &query);
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("[+]source-api excluded: ok\n"), "{body}");
    assert!(body.contains("no matches for \"nope\""), "{body}");
    assert!(body.ends_with("healthz check passed\n"), "{body}");
}
