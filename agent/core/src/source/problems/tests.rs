use super::*;

fn lines(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn the_first_problem_is_shown_with_how_many_more() {
    let problem = ManifestProblem::rejected("/m/bad.yaml", &lines(&["/m/bad.yaml:3:5: a", "b"]));
    let problem = problem.expect("a problem");
    assert_eq!((problem.severity, problem.count), (Severity::Rejected, 2));
    assert_eq!(problem.to_string(), "/m/bad.yaml:3:5: a (+1 more)");
    let one = ManifestProblem::warned("k", &lines(&["k:1:1: warning: x: y\nmore"]));
    assert_eq!(one.map(|p| p.to_string()).as_deref(), Some("k:1:1: warning: x: y more"));
    assert_eq!(ManifestProblem::warned("k", &[]), None, "no warning, no problem");
}

#[test]
fn the_summary_counts_each_severity() {
    let rejected = ManifestProblem::rejected("a", &lines(&["a: x"]));
    let warned = ManifestProblem::warned("b", &lines(&["b: warning: y"]));
    let all: Vec<ManifestProblem> =
        [rejected.clone(), warned.clone(), warned.clone()].into_iter().flatten().collect();
    assert_eq!(summary(&[]), None);
    assert_eq!(summary(&all[..1]).as_deref(), Some("1 manifest rejected"));
    assert_eq!(summary(&all[1..]).as_deref(), Some("2 manifests with warnings"));
    assert_eq!(summary(&all).as_deref(), Some("1 manifest rejected, 2 with warnings"));
}

#[test]
fn located_problems_read_like_a_compiler_s() {
    assert_eq!(located(&"u", Some((3, 5)), &"3:5: bad"), "u:3:5: bad");
    assert_eq!(located(&"u", None, &"bad"), "u: bad");
}
