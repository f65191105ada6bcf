use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;

use super::{Disk, Error, Image, Plan, Policy, Reason, plan};

const MIB: u64 = 1 << 20;

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).unwrap()
}

fn image(id: &str, size: u64, detected: i64, used: i64) -> Image {
    Image {
        id: id.to_owned(),
        size,
        first_detected: at(detected),
        last_used: at(used),
        in_use: false,
        pinned: false,
        kept: false,
    }
}

/// A disk of 100 MiB with `used` MiB used.
fn disk(used: u64) -> Disk {
    Disk { capacity: 100 * MIB, available: (100 - used) * MIB }
}

fn ids(plan: &Plan) -> Vec<&str> {
    plan.remove.iter().map(|(id, _)| id.as_str()).collect()
}

#[test]
fn the_defaults_are_kubelets() {
    let policy = Policy::default();
    assert_eq!((policy.high_threshold_percent, policy.low_threshold_percent), (85, 80));
    assert_eq!((policy.min_age, policy.max_age), (Duration::from_secs(120), None));
}

#[test]
fn thresholds_are_checked_as_kubelet_checks_them() {
    let min = Duration::from_secs(120);
    assert_eq!(Policy::new(85, 80, min, Duration::ZERO), Ok(Policy::default()));
    assert_eq!(Policy::new(101, 80, min, Duration::ZERO), Err(Error::High(101)));
    assert_eq!(Policy::new(-1, 80, min, Duration::ZERO), Err(Error::High(-1)));
    assert_eq!(Policy::new(85, -5, min, Duration::ZERO), Err(Error::Low(-5)));
    assert_eq!(
        Policy::new(80, 80, min, Duration::ZERO),
        Err(Error::LowNotBelowHigh { low: 80, high: 80 })
    );
    assert!(Policy::new(1, 0, Duration::ZERO, Duration::ZERO).is_ok());
    assert!(Policy::new(100, 99, min, Duration::ZERO).is_ok());
    assert_eq!(Policy::new(85, 80, min, min), Err(Error::MaxAgeNotAboveMin { max: min, min }));
    let max = Duration::from_secs(3600);
    assert_eq!(Policy::new(85, 80, min, max).map(|p| p.max_age), Ok(Some(max)));
}

#[test]
fn usage_rounds_as_kubelet_does() {
    assert_eq!(disk(85).usage_percent(), 85);
    assert_eq!(Disk { capacity: 1000, available: 151 }.usage_percent(), 85);
    assert_eq!(Disk { capacity: 1000, available: 150 }.usage_percent(), 85);
    assert_eq!(Disk { capacity: 1000, available: 149 }.usage_percent(), 86);
    assert_eq!(Disk { capacity: 0, available: 0 }.usage_percent(), 0);
}

#[test]
fn below_the_high_threshold_nothing_goes() {
    let images = [image("a", 50 * MIB, 0, 0)];
    assert_eq!(plan(&images, disk(84), &Policy::default(), at(0), at(1000)), Plan::default());
}

#[test]
fn at_the_high_threshold_the_least_recently_used_go_down_to_the_low_one() {
    let images = [
        image("newest", 2 * MIB, 0, 500),
        image("oldest", 2 * MIB, 0, 100),
        image("middle", 2 * MIB, 0, 300),
        image("tie-later", 2 * MIB, 50, 100),
    ];
    // 85 % used: 5 MiB to free to get to 80 %.
    let plan = plan(&images, disk(85), &Policy::default(), at(0), at(1000));
    assert_eq!(ids(&plan), ["oldest", "tie-later", "middle"]);
    assert_eq!((plan.to_free, plan.freeing), (5 * MIB, 6 * MIB));
    assert!(plan.remove.iter().all(|(_, reason)| *reason == Reason::Space));
}

#[test]
fn images_in_use_pinned_or_kept_never_go() {
    let mut used = image("used", MIB, 0, 0);
    used.in_use = true;
    let mut pinned = image("pinned", MIB, 0, 0);
    pinned.pinned = true;
    let mut kept = image("kept", MIB, 0, 0);
    kept.kept = true;
    let free = image("free", MIB, 0, 0);
    let policy = Policy::new(1, 0, Duration::ZERO, Duration::from_secs(1)).unwrap();
    let plan = plan(&[used, pinned, kept, free], disk(99), &policy, at(0), at(1000));
    assert_eq!(plan.remove, [("free".to_owned(), Reason::Age)]);
    assert_eq!(plan.freeing, 0);
}

#[test]
fn images_detected_recently_are_not_collected_for_space() {
    let images = [image("young", 10 * MIB, 950, 950), image("old", MIB, 0, 960)];
    let plan = plan(&images, disk(90), &Policy::default(), at(0), at(1000));
    // The young one was detected 50 s ago (less than 2 min): only the old one goes,
    // short of what was to be freed.
    assert_eq!(ids(&plan), ["old"]);
    assert_eq!((plan.to_free, plan.freeing), (10 * MIB, MIB));
    // Detected exactly the minimum age ago: it may go.
    let plan = super::plan(&images, disk(90), &Policy::default(), at(0), at(1070));
    assert_eq!(ids(&plan), ["young"]);
}

#[test]
fn images_unused_longer_than_the_maximum_age_go_whatever_the_disk() {
    let policy = Policy::new(85, 80, Duration::from_secs(120), Duration::from_secs(600)).unwrap();
    let images = [image("stale", MIB, 0, 100), image("fresh", MIB, 0, 500)];
    let plan = plan(&images, disk(10), &policy, at(0), at(1000));
    assert_eq!(plan.remove, [("stale".to_owned(), Reason::Age)]);
    // Not before the agent has tracked images that long.
    assert_eq!(super::plan(&images, disk(10), &policy, at(500), at(1000)), Plan::default());
}

#[test]
fn a_high_threshold_of_100_turns_space_collection_off() {
    let policy = Policy::new(100, 99, Duration::ZERO, Duration::ZERO).unwrap();
    let full = Disk { capacity: 100, available: 0 };
    assert_eq!(plan(&[image("a", 1, 0, 0)], full, &policy, at(0), at(1000)), Plan::default());
}

fn arb_image() -> impl Strategy<Value = Image> {
    (1..20u64, 0..1000i64, 0..1000i64, any::<[bool; 3]>()).prop_map(
        |(size, detected, used, [in_use, pinned, kept])| Image {
            in_use,
            pinned,
            kept,
            ..image("", size * MIB, detected, detected.max(used))
        },
    )
}

fn arb_images() -> impl Strategy<Value = Vec<Image>> {
    proptest::collection::vec(arb_image(), 0..12).prop_map(|mut images| {
        for (n, image) in images.iter_mut().enumerate() {
            image.id = format!("i{n}");
        }
        images
    })
}

proptest! {
    /// Never an image in use, pinned or kept; never twice; for space, least recently used
    /// first among those old enough, and no more once enough is freed.
    #[test]
    fn never_removes_an_image_in_use_and_frees_lru_first(
        images in arb_images(),
        used in 0..=100u64,
        high in 1..=100i64,
        low_below in 1..=50i64,
        min_age in 0..500u64,
        max_age in prop_oneof![Just(0u64), 501..2000u64],
    ) {
        let low = (high - low_below).max(0);
        let policy = Policy::new(high, low, Duration::from_secs(min_age), Duration::from_secs(max_age)).unwrap();
        let plan = plan(&images, disk(used), &policy, at(0), at(2000));
        let chosen: Vec<&str> = ids(&plan);
        let unique: BTreeSet<&str> = chosen.iter().copied().collect();
        prop_assert_eq!(unique.len(), chosen.len());
        for (id, _) in &plan.remove {
            let image = images.iter().find(|i| &i.id == id).unwrap();
            prop_assert!(!image.in_use && !image.pinned && !image.kept);
        }
        let space: Vec<&Image> = plan
            .remove
            .iter()
            .filter(|(_, r)| *r == Reason::Space)
            .filter_map(|(id, _)| images.iter().find(|i| &i.id == id))
            .collect();
        for pair in space.windows(2) {
            prop_assert!((pair[0].last_used, pair[0].first_detected) <= (pair[1].last_used, pair[1].first_detected));
        }
        if let Some((last, before)) = space.split_last() {
            let freed_before: u64 = before.iter().map(|i| i.size).sum();
            prop_assert!(freed_before < plan.to_free);
            prop_assert!(at(2000).duration_since(last.first_detected).as_secs() >= i64::try_from(min_age).unwrap());
        }
    }
}
