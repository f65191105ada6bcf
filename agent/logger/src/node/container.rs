//! A registered container in the node logger: opening its FIFOs and log file, releasing
//! them, writing what they hold, and forgetting it when its output has ended.

use std::os::fd::AsFd;

use nix::sys::epoll::{EpollEvent, EpollFlags};

use super::output::{Output, Progress};
use super::protocol::Registration;
use super::{Container, Error, NodeLogger, Result, STDERR, STDOUT, Target, chain};
use crate::cri::{self, Stream, Tag};
use crate::rotation::LogFile;
use crate::time::Time;

impl NodeLogger {
    /// Opens and records a new container.
    pub(super) fn register(&mut self, registration: Registration) -> Result<u64> {
        let id = registration.id.clone();
        if self.containers.values().any(|c| c.registration.id == id) {
            return Err(Error::Registered(id));
        }
        let fields = registration.to_fields()?;
        self.dirs
            .save(&registration, &fields)
            .map_err(|source| Error::Record { id: id.clone(), source })?;
        self.add(registration).map_err(|e| {
            let _ = self.dirs.forget(&id);
            Error::Container { id, source: Box::new(e) }
        })
    }

    /// Opens a container's FIFOs (held) and log file and watches the FIFOs.
    pub(super) fn add(&mut self, registration: Registration) -> Result<u64> {
        let dir = &registration.fifos;
        let open = |name, stream| {
            Output::open(dir, name, stream).map_err(|source| Error::Fifo {
                name,
                path: dir.join(name),
                source,
            })
        };
        let stdout = open(STDOUT, Stream::Stdout)?;
        let stderr =
            if dir.join(STDERR).exists() { Some(open(STDERR, Stream::Stderr)?) } else { None };
        let file = LogFile::open(&registration.log, registration.limits).map_err(Error::LogFile)?;
        let key = self.next;
        self.next += 1;
        let outputs = [Some(stdout), stderr];
        for (index, output) in outputs.iter().enumerate() {
            let Some(output) = output else { continue };
            let token = self.token(Target::Output { container: key, index });
            let flags = EpollFlags::EPOLLIN | EpollFlags::EPOLLET;
            self.epoll
                .add(output.reader().as_fd(), EpollEvent::new(flags, token))
                .map_err(Error::Watch)?;
        }
        self.containers.insert(key, Container { registration, file, outputs, failing: false });
        for index in 0..2 {
            self.pump(key, index, false);
        }
        Ok(key)
    }

    /// The agent is done creating the container (or gone): its end is the shim's end.
    pub(super) fn release(&mut self, key: u64) {
        let Some(container) = self.containers.get_mut(&key) else { return };
        for output in container.outputs.iter_mut().flatten() {
            output.release();
        }
        for index in 0..2 {
            self.pump(key, index, false);
        }
    }

    /// Writes what output `index` of container `key` holds; forgets the container once
    /// both outputs have ended.
    pub(super) fn pump(&mut self, key: u64, index: usize, hung_up: bool) {
        let Some(container) = self.containers.get_mut(&key) else { return };
        let Container { registration, file, outputs, failing } = container;
        let Some(output) = outputs[index].as_mut() else { return };
        if hung_up {
            output.hang_up();
        }
        let record = &mut self.record;
        let progress = self.pump.pump(output, |stream, tag, content| {
            write(file, failing, record, &registration.id, stream, tag, content);
        });
        let ended = match progress {
            Ok(Progress::Waiting) => false,
            Ok(Progress::Ended) => true,
            Err(e) => {
                eprintln!(
                    "outpost-container-log: container {}: cannot read its {}: {e}; ending this stream",
                    registration.id,
                    output.stream.as_str()
                );
                true
            }
        };
        if ended {
            outputs[index] = None;
            self.targets.retain(|_, target| {
                !matches!(target, Target::Output { container, index: i }
                    if *container == key && *i == index)
            });
        }
        if outputs.iter().all(Option::is_none)
            && let Some(container) = self.containers.remove(&key)
        {
            self.forget(container);
        }
    }

    pub(super) fn forget(&mut self, container: Container) {
        let Container { registration, file, .. } = container;
        drop(file);
        if let Err(e) = self.dirs.forget(&registration.id) {
            eprintln!(
                "outpost-container-log: container {}: cannot forget it: {e}",
                registration.id
            );
        }
        if let Err(e) = std::fs::remove_dir_all(&registration.fifos) {
            eprintln!("outpost-container-log: cannot remove {}: {e}", registration.fifos.display());
        }
    }
}

/// Writes one record; a failure is reported once per run of failures and the output
/// dropped meanwhile.
fn write(
    file: &mut LogFile,
    failing: &mut bool,
    record: &mut Vec<u8>,
    id: &str,
    stream: Stream,
    tag: Tag,
    content: &[u8],
) {
    let now = Time::now();
    record.clear();
    cri::encode(record, now, stream, tag, content);
    match file.write_record(record, now) {
        Ok(()) => *failing = false,
        Err(e) => {
            if !*failing {
                eprintln!(
                    "outpost-container-log: container {id}: {}; dropping its output until writes succeed again",
                    chain(&e)
                );
            }
            *failing = true;
        }
    }
}
