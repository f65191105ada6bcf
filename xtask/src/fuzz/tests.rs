use super::*;

#[test]
fn libfuzzers_final_stats_are_read() {
    let log = "#65536\tpulse  cov: 1 ft: 2 corp: 3/4b exec/s: 5 rss: 6Mb\n\
               Done 120000 runs in 31 second(s)\n\
               stat::number_of_executed_units: 120000\n\
               stat::average_exec_per_sec:     3870\n\
               stat::new_units_added:          17\n\
               stat::slowest_unit_time_sec:    0\n\
               stat::peak_rss_mb:              88\n";
    let outcome = parse_stats(log);
    assert_eq!(
        outcome,
        Outcome {
            executions: 120_000,
            exec_per_second: 3870,
            new_units: 17,
            peak_rss_mb: 88,
            ..Outcome::default()
        }
    );
    assert_eq!(parse_stats("no stats here"), Outcome::default());
}

#[test]
fn options_default_to_every_target_for_the_ci_time() {
    let options = Options::parse(&[]).unwrap();
    assert_eq!(options.minutes, DEFAULT_MINUTES);
    assert_eq!(options.targets, TARGETS);
    assert!(options.merge);
    assert!(!options.shared_build);
    let args: Vec<String> =
        ["--minutes", "10", "--target", "merge", "--no-merge", "--shared-build"]
            .map(String::from)
            .into();
    let options = Options::parse(&args).unwrap();
    assert_eq!(
        (options.minutes, options.targets, options.merge, options.shared_build),
        (10.0, vec!["merge".into()], false, true)
    );
    assert!(Options::parse(&["--target".into(), "nope".into()]).is_err());
    assert!(Options::parse(&["--minutes".into(), "-1".into()]).is_err());
}

#[test]
fn every_target_has_a_fuzz_target_and_a_corpus() {
    let fuzz = crate::project_root().join("fuzz");
    for target in TARGETS {
        assert!(fuzz.join("fuzz_targets").join(format!("{target}.rs")).is_file(), "{target}");
        assert!(fuzz.join("corpus").join(target).is_dir(), "{target}");
    }
}
