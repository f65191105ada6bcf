//! Image garbage collection, as kubelet's image GC manager decides it: images unused for
//! longer than `imageMaximumGCAge` go whatever the disk; when the image filesystem is
//! `imageGCHighThresholdPercent` full or more, unused images go, least recently used
//! first, until its usage is down to `imageGCLowThresholdPercent`, none detected less
//! than `imageMinimumGCAge` ago. An image a container uses (running or kept dead), a
//! pinned one, or one kept for another reason (its `--images-dir` tarball is there) never
//! goes.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// kubelet's `imageGCHighThresholdPercent` default.
pub const DEFAULT_HIGH_THRESHOLD_PERCENT: u8 = 85;
/// kubelet's `imageGCLowThresholdPercent` default.
pub const DEFAULT_LOW_THRESHOLD_PERCENT: u8 = 80;
/// kubelet's `imageMinimumGCAge` default.
pub const DEFAULT_MIN_AGE: Duration = Duration::from_secs(120);

/// The policy is not one kubelet would accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(
        "imageGCHighThresholdPercent (--image-gc-high-threshold) {0} must be between 0 and 100"
    )]
    High(i64),
    #[error("imageGCLowThresholdPercent (--image-gc-low-threshold) {0} must be between 0 and 100")]
    Low(i64),
    #[error(
        "imageGCLowThresholdPercent (--image-gc-low-threshold) {low} must be less than \
         imageGCHighThresholdPercent (--image-gc-high-threshold) {high}"
    )]
    LowNotBelowHigh { low: u8, high: u8 },
    #[error(
        "imageMaximumGCAge {max:?} must be greater than imageMinimumGCAge \
         (--minimum-image-ttl-duration) {min:?}, or 0 to turn it off"
    )]
    MaxAgeNotAboveMin { max: Duration, min: Duration },
}

/// kubelet's image GC policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// At or above this disk usage (percent), images are collected; 100 turns it off.
    pub high_threshold_percent: u8,
    /// Down to below this usage.
    pub low_threshold_percent: u8,
    /// An image detected less than this long ago is not collected for space.
    pub min_age: Duration,
    /// Images unused for longer than this are collected whatever the disk (`None`: off).
    pub max_age: Option<Duration>,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            high_threshold_percent: DEFAULT_HIGH_THRESHOLD_PERCENT,
            low_threshold_percent: DEFAULT_LOW_THRESHOLD_PERCENT,
            min_age: DEFAULT_MIN_AGE,
            max_age: None,
        }
    }
}

impl Policy {
    /// The policy from the thresholds as given, checked as kubelet checks them (each in
    /// 0..=100, low below high; a maximum age above the minimum); a zero maximum age is
    /// off.
    pub fn new(high: i64, low: i64, min_age: Duration, max_age: Duration) -> Result<Policy, Error> {
        let high = u8::try_from(high).ok().filter(|h| *h <= 100).ok_or(Error::High(high))?;
        let low = u8::try_from(low).ok().filter(|l| *l <= 100).ok_or(Error::Low(low))?;
        if low >= high {
            return Err(Error::LowNotBelowHigh { low, high });
        }
        let max_age = (!max_age.is_zero()).then_some(max_age);
        if let Some(max) = max_age
            && max <= min_age
        {
            return Err(Error::MaxAgeNotAboveMin { max, min: min_age });
        }
        Ok(Policy { high_threshold_percent: high, low_threshold_percent: low, min_age, max_age })
    }
}

/// The image filesystem's size and free space, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disk {
    pub capacity: u64,
    pub available: u64,
}

impl Disk {
    /// Used space in whole percent, as kubelet rounds it (`100 - available*100/capacity`).
    pub fn usage_percent(&self) -> u64 {
        if self.capacity == 0 {
            return 0;
        }
        let available = u128::from(self.available.min(self.capacity)) * 100;
        100 - u64::try_from(available / u128::from(self.capacity)).unwrap_or(100)
    }
}

/// An image as the agent knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// What identifies it (its content digest: all its names go together).
    pub id: String,
    /// Bytes its removal frees (its content).
    pub size: u64,
    /// When the agent first saw it.
    pub first_detected: Timestamp,
    /// When a container last used it (the first detection if none did).
    pub last_used: Timestamp,
    /// A container of the agent uses it (running or kept dead).
    pub in_use: bool,
    /// containerd's `io.cri-containerd.pinned` label.
    pub pinned: bool,
    /// Kept for another reason: its `--images-dir` tarball is there.
    pub kept: bool,
}

impl Image {
    fn evictable(&self) -> bool {
        !(self.in_use || self.pinned || self.kept)
    }
}

/// Why an image is collected (kubelet's `reason` label of its GC metric).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Unused longer than `imageMaximumGCAge`.
    Age,
    /// The disk is over the high threshold.
    Space,
}

/// What to do now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The images to remove, in order, and why.
    pub remove: Vec<(String, Reason)>,
    /// Bytes to free to get below the low threshold (0: the disk is below the high one).
    pub to_free: u64,
    /// Bytes the chosen images free for space (short of `to_free`: not enough could go).
    pub freeing: u64,
}

/// kubelet's decision at `now` for `images` on `disk` under `policy`; `started` is when
/// the agent began tracking images (no image is old by `imageMaximumGCAge` before that
/// long has passed since, as kubelet waits after its start).
pub fn plan(
    images: &[Image],
    disk: Disk,
    policy: &Policy,
    started: Timestamp,
    now: Timestamp,
) -> Plan {
    let mut candidates: Vec<&Image> = images.iter().filter(|i| i.evictable()).collect();
    candidates.sort_by_key(|i| (i.last_used, i.first_detected));
    let mut plan = Plan::default();
    if let Some(max_age) = policy.max_age
        && older_than(started, now, max_age)
    {
        candidates.retain(|image| {
            let old = older_than(image.last_used, now, max_age);
            if old {
                plan.remove.push((image.id.clone(), Reason::Age));
            }
            !old
        });
    }
    if policy.high_threshold_percent >= 100
        || disk.usage_percent() < u64::from(policy.high_threshold_percent)
    {
        return plan;
    }
    let low = u128::from(100 - policy.low_threshold_percent);
    let target_available = u64::try_from(u128::from(disk.capacity) * low / 100).unwrap_or(u64::MAX);
    plan.to_free = target_available.saturating_sub(disk.available);
    for image in candidates {
        if plan.freeing >= plan.to_free {
            break;
        }
        if elapsed(image.first_detected, now) < policy.min_age {
            continue;
        }
        plan.remove.push((image.id.clone(), Reason::Space));
        plan.freeing = plan.freeing.saturating_add(image.size);
    }
    plan
}

/// `since` lies more than `age` before `now`.
fn older_than(since: Timestamp, now: Timestamp, age: Duration) -> bool {
    elapsed(since, now) > age
}

/// The time from `since` to `now` (zero if `since` is later).
fn elapsed(since: Timestamp, now: Timestamp) -> Duration {
    let elapsed = now.duration_since(since);
    if elapsed.is_negative() { Duration::ZERO } else { elapsed.unsigned_abs() }
}

#[cfg(test)]
mod tests;
