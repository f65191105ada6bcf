use outpost_core::pod::Source;

use super::*;
use crate::source::problems::ManifestProblem;

fn check(name: &str, passed: bool, detail: &str) -> Check {
    Check::new(name, passed, detail)
}

/// A live file source with one manifest rejected and one with warnings.
fn file_with_problems() -> SourceHealth {
    let mut health = SourceHealth::new(Source::File);
    health.state = SourceState::Live;
    let bad = ["/m/bad.yaml:3:5: spec.containers[0].image: missing".to_owned(), "x".to_owned()];
    let warned = ["/m/web.yaml:1:1: warning: spec.nodeSelector: not checked".to_owned()];
    health.problems = [
        ManifestProblem::rejected("/m/bad.yaml", &bad),
        ManifestProblem::warned("/m/web.yaml", &warned),
    ]
    .into_iter()
    .flatten()
    .collect();
    health
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

#[test]
fn manifests_with_problems_are_listed_under_their_source_and_fail_nothing() {
    let file = source_check(&file_with_problems());
    assert!(file.passed, "the other pods run: readiness stays (M9)");
    assert_eq!(file.detail, "live; 1 manifest rejected, 1 with warnings");
    let checks = [file, check("runtime", true, "containerd connected")];
    assert_eq!(report("readyz", &checks, &Query::default()), (StatusCode::OK, "ok".into()));
    let query = Query { verbose: true, exclude: vec![] };
    let (status, body) = report("readyz", &checks, &query);
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        "[+]source-file ok: live; 1 manifest rejected, 1 with warnings\n\
         \x20   /m/bad.yaml:3:5: spec.containers[0].image: missing (+1 more)\n\
         \x20   /m/web.yaml:1:1: warning: spec.nodeSelector: not checked\n\
         [+]runtime ok: containerd connected\n\
         readyz check passed\n"
    );
}

#[test]
fn a_failing_source_shows_its_problems_with_its_failure() {
    let mut health = file_with_problems();
    health.state = SourceState::NeverSeen;
    health.last_error = Some("down".into());
    health.problems.truncate(1);
    let (status, body) = report("readyz", &[source_check(&health)], &Query::default());
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        body,
        "[-]source-file failed: never seen (failing: down); 1 manifest rejected\n\
         \x20   /m/bad.yaml:3:5: spec.containers[0].image: missing (+1 more)\n\
         readyz check failed\n"
    );
    health.problems.clear();
    assert_eq!(source_check(&health).detail, "never seen (failing: down)");
    assert!(source_check(&health).notes.is_empty());
}
