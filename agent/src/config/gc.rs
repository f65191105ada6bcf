//! The garbage collector's settings (G1), with kubelet's flag and field names: dead
//! containers (`--maximum-dead-containers-per-container`, `--maximum-dead-containers`,
//! `--minimum-container-ttl-duration`) and images (`imageGCHighThresholdPercent`,
//! `imageGCLowThresholdPercent`, `imageMinimumGCAge`, `imageMaximumGCAge`), checked as
//! kubelet checks them.

use std::time::Duration;

pub use outpost_core::gc::containers::{DEFAULT_MAX_CONTAINERS, DEFAULT_MAX_PER_POD_CONTAINER};
use outpost_core::gc::images::DEFAULT_MIN_AGE;
pub use outpost_core::gc::images::{DEFAULT_HIGH_THRESHOLD_PERCENT, DEFAULT_LOW_THRESHOLD_PERCENT};
use outpost_core::gc::{containers, images};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{field} {value:?}: expected a duration such as \"0s\", \"2m\" or \"1h30m\"")]
    Duration { field: &'static str, value: String },
    #[error("image garbage collection: {0}")]
    Images(#[from] images::Error),
}

/// The settings as given (flags over the file); `None`: kubelet's default.
#[derive(Debug, Clone, Default)]
pub struct Given {
    pub maximum_dead_containers_per_container: Option<i32>,
    pub maximum_dead_containers: Option<i32>,
    pub minimum_container_ttl_duration: Option<String>,
    pub image_gc_high_threshold: Option<i64>,
    pub image_gc_low_threshold: Option<i64>,
    pub minimum_image_ttl_duration: Option<String>,
    pub image_maximum_gc_age: Option<String>,
}

/// The garbage collector's policies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcConfig {
    pub containers: containers::Policy,
    pub images: images::Policy,
}

impl GcConfig {
    pub fn resolve(given: Given) -> Result<GcConfig, Error> {
        let duration = |field, raw: Option<String>, default| match raw {
            None => Ok(default),
            Some(raw) => {
                outpost_core::duration::parse(&raw).ok_or(Error::Duration { field, value: raw })
            }
        };
        let containers = containers::Policy {
            min_age: duration(
                "minimum-container-ttl-duration",
                given.minimum_container_ttl_duration,
                Duration::ZERO,
            )?,
            max_per_pod_container: given
                .maximum_dead_containers_per_container
                .unwrap_or(DEFAULT_MAX_PER_POD_CONTAINER),
            max_containers: given.maximum_dead_containers.unwrap_or(DEFAULT_MAX_CONTAINERS),
        };
        let images = images::Policy::new(
            given.image_gc_high_threshold.unwrap_or(DEFAULT_HIGH_THRESHOLD_PERCENT.into()),
            given.image_gc_low_threshold.unwrap_or(DEFAULT_LOW_THRESHOLD_PERCENT.into()),
            duration(
                "minimum-image-ttl-duration",
                given.minimum_image_ttl_duration,
                DEFAULT_MIN_AGE,
            )?,
            duration("image-maximum-gc-age", given.image_maximum_gc_age, Duration::ZERO)?,
        )?;
        Ok(GcConfig { containers, images })
    }
}

#[cfg(test)]
mod tests;
