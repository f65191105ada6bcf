use std::time::Duration;

use super::{Error, GcConfig, Given};
use crate::config::{Config, Settings};

#[test]
fn kubelets_defaults() {
    let config = GcConfig::resolve(Given::default()).unwrap();
    assert_eq!(config, GcConfig::default());
    assert_eq!(config.containers.max_per_pod_container, 1);
    assert_eq!(config.containers.max_containers, -1);
    assert_eq!(config.containers.min_age, Duration::ZERO);
    assert_eq!(config.images.high_threshold_percent, 85);
    assert_eq!(config.images.low_threshold_percent, 80);
    assert_eq!(config.images.min_age, Duration::from_secs(120));
    assert_eq!(config.images.max_age, None);
}

#[test]
fn flags_are_kubelets() {
    let settings = crate::config::tests::parse_flags(&[
        "--maximum-dead-containers-per-container",
        "2",
        "--maximum-dead-containers=-1",
        "--minimum-container-ttl-duration",
        "1m",
        "--image-gc-high-threshold",
        "1",
        "--image-gc-low-threshold",
        "0",
        "--minimum-image-ttl-duration",
        "0s",
        "--image-maximum-gc-age",
        "24h",
    ]);
    let config = Config::resolve(Settings { node_name: Some("n".into()), ..settings }).unwrap().gc;
    assert_eq!(config.containers.max_per_pod_container, 2);
    assert_eq!(config.containers.max_containers, -1);
    assert_eq!(config.containers.min_age, Duration::from_secs(60));
    assert_eq!((config.images.high_threshold_percent, config.images.low_threshold_percent), (1, 0));
    assert_eq!(config.images.min_age, Duration::ZERO);
    assert_eq!(config.images.max_age, Some(Duration::from_secs(86_400)));
}

#[test]
fn the_file_takes_kubelet_configuration_names() {
    let yaml = "imageGCHighThresholdPercent: 90\nimageGCLowThresholdPercent: 70\n\
                imageMinimumGCAge: 5m\nimageMaximumGCAge: 0s\nmaximumDeadContainers: 10\n";
    let settings = Settings::from_yaml(yaml).unwrap();
    let config = Config::resolve(Settings { node_name: Some("n".into()), ..settings }).unwrap().gc;
    assert_eq!(
        (config.images.high_threshold_percent, config.images.low_threshold_percent),
        (90, 70)
    );
    assert_eq!(config.images.min_age, Duration::from_secs(300));
    assert_eq!(config.images.max_age, None);
    assert_eq!(config.containers.max_containers, 10);
}

#[test]
fn thresholds_are_validated_as_kubelet_does() {
    let given = |high, low| Given {
        image_gc_high_threshold: Some(high),
        image_gc_low_threshold: Some(low),
        ..Given::default()
    };
    for (high, low) in [(101, 80), (85, -1), (80, 80), (50, 60)] {
        let error = GcConfig::resolve(given(high, low)).unwrap_err();
        assert!(matches!(error, Error::Images(_)), "{high}/{low}: {error}");
    }
    let error = GcConfig::resolve(Given {
        minimum_container_ttl_duration: Some("soon".into()),
        ..Given::default()
    })
    .unwrap_err();
    assert!(error.to_string().contains("minimum-container-ttl-duration"), "{error}");
}
