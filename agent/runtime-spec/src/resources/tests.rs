use proptest::prelude::*;

use super::super::tests::pod;
use super::*;

fn resources_of(yaml: &str) -> Result<LinuxResources> {
    let pod = pod(&format!("spec: {{containers: [{{name: app, image: b, resources: {yaml}}}]}}"));
    let container = &pod.spec.as_ref().unwrap().containers[0];
    resources(container, &Security::default(), &Subject::container(&pod, "app"))
}

fn cpu(yaml: &str) -> (Option<u64>, Option<i64>, Option<u64>) {
    let cpu = resources_of(yaml).unwrap().cpu().clone().unwrap();
    (cpu.shares(), cpu.quota(), cpu.period())
}

fn memory(yaml: &str) -> Option<i64> {
    resources_of(yaml).unwrap().memory().and_then(|m| m.limit())
}

#[test]
fn best_effort_gets_minimum_shares_and_no_limits() {
    assert_eq!(cpu("{}"), (Some(2), None, None));
    assert_eq!(memory("{}"), None);
}

#[test]
fn cpu_request_and_limit() {
    assert_eq!(cpu("{requests: {cpu: 100m}}"), (Some(102), None, None));
    assert_eq!(cpu("{requests: {cpu: '1'}}"), (Some(1024), None, None));
    assert_eq!(cpu("{requests: {cpu: 1m}}"), (Some(2), None, None));
    assert_eq!(cpu("{requests: {cpu: '1000'}}"), (Some(262_144), None, None));
    assert_eq!(cpu("{limits: {cpu: '2'}}"), (Some(2048), Some(200_000), Some(100_000)));
    assert_eq!(cpu("{limits: {cpu: 1m}}"), (Some(2), Some(1_000), Some(100_000)), "minimum quota");
    assert_eq!(
        cpu("{limits: {cpu: 500m}, requests: {cpu: 100m}}"),
        (Some(102), Some(50_000), Some(100_000))
    );
    assert_eq!(cpu("{limits: {cpu: '0'}}"), (Some(2), None, None), "a zero limit is no limit");
    assert_eq!(cpu("{limits: {cpu: 0.5}}"), (Some(512), Some(50_000), Some(100_000)));
}

#[test]
fn memory_limit() {
    assert_eq!(memory("{limits: {memory: 64Mi}}"), Some(64 << 20));
    assert_eq!(memory("{limits: {memory: 1G}}"), Some(1_000_000_000));
    assert_eq!(memory("{limits: {memory: 1e9}}"), Some(1_000_000_000));
    assert_eq!(memory("{limits: {memory: 100k}}"), Some(100_000));
    assert_eq!(memory("{limits: {memory: 1500m}}"), Some(2), "rounded up to a byte");
    assert_eq!(memory("{requests: {memory: 64Mi}}"), None, "a request alone sets no limit");
}

#[test]
fn device_rules_come_along() {
    let devices = resources_of("{}").unwrap().devices().clone().unwrap();
    assert_eq!(devices.len(), 1);
    assert!(!devices[0].allow());
}

#[test]
fn bad_quantities_name_the_field() {
    let error = resources_of("{requests: {cpu: lots}}").unwrap_err();
    assert!(
        matches!(&error, Error::Quantity { field, value, .. } if field == "resources.requests.cpu" && value == "lots")
    );
    let error = resources_of("{limits: {memory: '-1'}}").unwrap_err();
    assert!(matches!(&error, Error::Quantity { source: quantity::Error::Negative, .. }));
}

proptest! {
    /// Shares stay within kubelet's bounds and grow with the request.
    #[test]
    fn shares_are_bounded_and_monotonic(a in 0i64..2_000_000, b in 0i64..2_000_000) {
        let (low, high) = (a.min(b), a.max(b));
        prop_assert!((2..=262_144).contains(&milli_cpu_to_shares(low)));
        prop_assert!(milli_cpu_to_shares(low) <= milli_cpu_to_shares(high));
        prop_assert!(milli_cpu_to_quota(low) <= milli_cpu_to_quota(high));
        prop_assert!(milli_cpu_to_quota(low) >= 1_000);
    }
}
