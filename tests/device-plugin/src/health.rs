//! The devices' health: a device is `Unhealthy` while a file named after its ID is in
//! the health directory. The directory is watched with inotify (set up before it is first
//! read, so no change is missed), and the list is sent again on each change.

use std::path::{Path, PathBuf};

use futures::StreamExt;
use inotify::{Inotify, WatchMask};
use outpost_kubelet_api::deviceplugin::v1beta1 as api;
use tokio::sync::watch;

use crate::Error;

/// The devices, in the order given, with their health now.
fn read(ids: &[String], dir: Option<&Path>) -> Vec<api::Device> {
    ids.iter()
        .map(|id| {
            let unhealthy = dir.is_some_and(|dir| dir.join(id).exists());
            api::Device {
                id: id.clone(),
                health: if unhealthy { api::UNHEALTHY } else { api::HEALTHY }.to_owned(),
                topology: None,
            }
        })
        .collect()
}

/// The device list, as it changes.
pub type Devices = watch::Receiver<Vec<api::Device>>;

/// The device list as it changes, and the task that follows the health directory (none
/// without one: every device stays healthy, and the list never changes).
pub fn follow(
    ids: Vec<String>,
    dir: Option<PathBuf>,
) -> Result<(Devices, Option<tokio::task::JoinHandle<()>>), Error> {
    let Some(dir) = dir else {
        let (_, devices) = watch::channel(read(&ids, None));
        return Ok((devices, None));
    };
    let error = |source| Error::Watch { dir: dir.clone(), source };
    std::fs::create_dir_all(&dir).map_err(error)?;
    let inotify = Inotify::init().map_err(error)?;
    let mask = WatchMask::CREATE | WatchMask::DELETE | WatchMask::MOVED_TO | WatchMask::MOVED_FROM;
    inotify.watches().add(&dir, mask).map_err(error)?;
    let mut changes = inotify.into_event_stream(vec![0; 4096]).map_err(error)?;
    let (sender, devices) = watch::channel(read(&ids, Some(&dir)));
    let task = tokio::spawn(async move {
        while let Some(Ok(_)) = changes.next().await {
            let now = read(&ids, Some(&dir));
            sender.send_if_modified(|devices| {
                let changed = *devices != now;
                *devices = now;
                changed
            });
        }
    });
    Ok((devices, Some(task)))
}
