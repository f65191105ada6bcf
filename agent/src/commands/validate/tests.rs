use std::fs;

use super::*;

const GOOD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: web\n    image: nginx:1\n";

fn run(paths: &[PathBuf]) -> (Summary, String) {
    run_on(paths, &NodeFacts::default())
}

fn run_on(paths: &[PathBuf], facts: &NodeFacts) -> (Summary, String) {
    let mut out = Vec::new();
    let summary = validate(paths, "node-a", facts, Source::File, &mut out).unwrap();
    (summary, String::from_utf8(out).unwrap())
}

#[test]
fn valid_files_report_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("web.yaml");
    fs::write(&f, GOOD).unwrap();
    let (summary, out) = run(&[f]);
    assert_eq!(summary, Summary { files: 1, pods: 1, invalid_files: 0, warnings: 0 });
    assert_eq!(out, "");
}

#[test]
fn errors_are_file_line_col_message() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.yaml");
    fs::write(&f, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: web\n    image: [1\n").unwrap();
    let (summary, out) = run(std::slice::from_ref(&f));
    assert_eq!(summary.invalid_files, 1);
    let prefix = format!("{}:", f.display());
    let line = out.lines().next().unwrap();
    assert!(line.starts_with(&prefix), "{out}");
    let rest: Vec<&str> = line[prefix.len()..].splitn(3, ':').collect();
    assert!(
        rest[0].parse::<usize>().is_ok() && rest[1].parse::<usize>().is_ok(),
        "line:col expected: {out}"
    );
}

#[test]
fn s10_directories_expand_to_their_manifests_and_m11_duplicates_warn() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.yaml"), GOOD).unwrap();
    fs::write(dir.path().join("b.json"), r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"i"}]}}"#).unwrap();
    fs::write(dir.path().join(".a.yaml.swp"), "garbage: [").unwrap();
    fs::write(dir.path().join("notes.txt"), "garbage: [").unwrap();
    let (summary, out) = run(&[dir.path().to_path_buf()]);
    assert_eq!(summary, Summary { files: 2, pods: 2, invalid_files: 0, warnings: 1 });
    assert!(out.contains("b.json: warning: pod default/web-node-a is also defined in"), "{out}");
}

#[test]
fn missing_and_unreadable_files_are_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let (summary, out) = run(&[dir.path().join("nope.yaml")]);
    assert_eq!(summary.invalid_files, 1);
    assert!(out.contains("nope.yaml: cannot read"), "{out}");
}

#[test]
fn a1_admission_warnings_are_printed_and_counted_not_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("web.yaml");
    fs::write(&f, GOOD.replace("spec:\n", "spec:\n  priorityClassName: gold\n")).unwrap();
    let (summary, out) = run(std::slice::from_ref(&f));
    assert_eq!(summary, Summary { files: 1, pods: 1, invalid_files: 0, warnings: 1 });
    assert_eq!(
        out,
        format!(
            "{}:6:3: warning: spec.priorityClassName: priority class \"gold\" is not known \
             without an API server: the pod has priority 0; set spec.priority, or use \
             system-node-critical or system-cluster-critical\n",
            f.display()
        )
    );
}

#[test]
fn a1_an_unsupported_field_is_an_error_with_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("web.yaml");
    fs::write(
        &f,
        GOOD.replace(
            "    image: nginx:1\n",
            "    image: nginx:1\n    resources:\n      claims: [{name: gpu}]\n",
        ),
    )
    .unwrap();
    let (summary, out) = run(std::slice::from_ref(&f));
    assert_eq!(summary.invalid_files, 1);
    assert!(
        out.starts_with(&format!(
            "{}:10:7: spec.containers[0].resources.claims: not supported: ",
            f.display()
        )),
        "{out}"
    );
}

#[test]
fn a1_what_this_node_refuses_makes_the_file_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("web.yaml");
    let pod = GOOD.replace(
        "spec:\n",
        "spec:\n  securityContext:\n    appArmorProfile: {type: RuntimeDefault}\n    sysctls: [{name: net.core.somaxconn, value: \"1024\"}]\n",
    );
    fs::write(&f, pod).unwrap();
    let (summary, out) = run(std::slice::from_ref(&f));
    assert_eq!(summary.invalid_files, 1);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    let prefix = format!("{}: pod default/web-node-a: ", f.display());
    assert!(
        lines[0].starts_with(&format!(
            "{prefix}AppArmor: Cannot enforce AppArmor: AppArmor is not enabled on the host"
        )),
        "{out}"
    );
    assert!(
        lines[1].starts_with(&format!(
            "{prefix}SysctlForbidden: forbidden sysctl: \"net.core.somaxconn\" not allowlisted"
        )),
        "{out}"
    );

    let able = NodeFacts {
        apparmor_enabled: true,
        allowed_unsafe_sysctls: vec!["net.core.*".into()],
        ..NodeFacts::default()
    };
    let (summary, out) = run_on(std::slice::from_ref(&f), &able);
    assert_eq!((summary.invalid_files, out.as_str()), (0, ""));
}

#[test]
fn node_facts_take_allowed_sysctls_from_the_flags_over_the_config_file() {
    use clap::Parser as _;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    fs::write(&config, "allowedUnsafeSysctls: [kernel.msgmax]\n").unwrap();
    let args = |extra: &[&str]| {
        let mut argv = vec!["outpost", "validate", "--config", config.to_str().unwrap()];
        argv.extend(extra);
        argv.push("web.yaml");
        match crate::cli::Cli::try_parse_from(argv).unwrap().command {
            crate::cli::Command::Validate(args) => args,
            _ => panic!("not validate"),
        }
    };
    assert_eq!(node_facts(&args(&[])).unwrap().allowed_unsafe_sysctls, ["kernel.msgmax"]);
    let flagged = node_facts(&args(&["--allowed-unsafe-sysctls", "net.core.*"])).unwrap();
    assert_eq!(flagged.allowed_unsafe_sysctls, ["net.core.*"]);
    let err = node_facts(&args(&["--allowed-unsafe-sysctls", "vm.swappiness"])).unwrap_err();
    assert!(err.to_string().contains("vm.swappiness"), "{err}");
}

#[test]
fn the_admission_policy_of_the_given_source_is_applied() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("host.yaml");
    fs::write(&f, format!("{GOOD}  hostNetwork: true\n")).unwrap();
    let check = |source: Source| {
        let mut out = Vec::new();
        let summary =
            validate(std::slice::from_ref(&f), "node-a", &NodeFacts::default(), source, &mut out);
        (summary.unwrap().invalid_files, String::from_utf8(out).unwrap())
    };
    assert_eq!(check(Source::File), (0, String::new()));
    let (invalid, out) = check(Source::Push);
    assert_eq!(invalid, 1, "{out}");
    assert!(
        out.contains("pod default/web-node-a: CapabilitiesForbidden: spec.hostNetwork: the host's network namespace is not allowed for pods from the push endpoint (source push); allow it with admissionPolicy.push.hostNetwork: true"),
        "{out}"
    );
    assert_eq!(source("push"), Source::Push);
    assert_eq!(source("url"), Source::Url);
    assert_eq!(source("api"), Source::Api);
    assert_eq!(source("file"), Source::File);
}
