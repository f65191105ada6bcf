//! The only `unsafe` code of the watch backends: the fanotify system calls, and the
//! registration of the backends' descriptors with tokio's reactor. Each function is a
//! thin, safe wrapper that owns what it hands to the kernel for the whole call.

use std::ffi::{c_int, c_uint};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Registers an owned descriptor (the fanotify group) with the reactor, for reading.
pub(super) fn register_file(file: File) -> io::Result<AsyncFd<File>> {
    // SAFETY: the `File` owns its descriptor and closes it only when dropped, so the
    // descriptor stays open, and `as_raw_fd` returns the same one, for as long as the
    // `AsyncFd` holds it.
    Ok(unsafe { AsyncFd::register_with_interest(file, Interest::READABLE) }?)
}

/// Registers an inotify instance with the reactor, for reading.
pub(super) fn register_inotify(inotify: inotify::Inotify) -> io::Result<AsyncFd<inotify::Inotify>> {
    // SAFETY: `inotify::Inotify` owns its descriptor (shared only with the `Watches`
    // handles it gives out, which never close it) and closes it only when the last
    // owner is dropped; `as_raw_fd` always returns that descriptor. So it stays open and
    // the same while the `AsyncFd` holds the instance.
    Ok(unsafe { AsyncFd::register_with_interest(inotify, Interest::READABLE) }?)
}

/// The largest file handle (`MAX_HANDLE_SZ`, `include/uapi/linux/fcntl.h`).
const MAX_HANDLE_SZ: usize = libc::MAX_HANDLE_SZ as usize;

/// A file handle as `name_to_handle_at(2)` encodes it (unique within one filesystem).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct FileHandle {
    pub handle_type: i32,
    pub bytes: Vec<u8>,
}

/// `struct file_handle` followed by room for the largest handle, as the kernel expects
/// it (`libc::file_handle` has a zero-length `f_handle`).
#[repr(C)]
struct HandleBuf {
    handle_bytes: c_uint,
    handle_type: c_int,
    f_handle: [u8; MAX_HANDLE_SZ],
}

pub(super) fn fanotify_init(flags: c_uint, event_f_flags: c_uint) -> io::Result<OwnedFd> {
    // SAFETY: fanotify_init takes two integers and returns a new descriptor or -1; it
    // touches no memory of ours.
    let fd = unsafe { libc::fanotify_init(flags, event_f_flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a descriptor the kernel just opened for us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fanotify_mark(fanotify, flags, mask, dir, NULL)`: marks (or unmarks) the directory
/// `dir` refers to.
pub(super) fn fanotify_mark(
    fanotify: BorrowedFd<'_>,
    flags: c_uint,
    mask: u64,
    dir: BorrowedFd<'_>,
) -> io::Result<()> {
    // SAFETY: both descriptors are open for the duration of the call (borrowed); with a
    // null path the kernel marks the object `dir` refers to and reads no memory of ours.
    let rc = unsafe {
        libc::fanotify_mark(fanotify.as_raw_fd(), flags, mask, dir.as_raw_fd(), std::ptr::null())
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The handle of the object `fd` refers to, encoded the way fanotify reports it
/// (`AT_HANDLE_FID`, Linux 6.5+; plain encoding on older kernels, which is the same for
/// every filesystem that fanotify could report on there).
pub(super) fn name_to_handle(fd: BorrowedFd<'_>) -> io::Result<FileHandle> {
    match name_to_handle_flags(fd, libc::AT_EMPTY_PATH | libc::AT_HANDLE_FID) {
        Err(error) if error.raw_os_error() == Some(libc::EINVAL) => {
            name_to_handle_flags(fd, libc::AT_EMPTY_PATH)
        }
        result => result,
    }
}

fn name_to_handle_flags(fd: BorrowedFd<'_>, flags: c_int) -> io::Result<FileHandle> {
    let mut buf = HandleBuf {
        handle_bytes: MAX_HANDLE_SZ as c_uint,
        handle_type: 0,
        f_handle: [0; MAX_HANDLE_SZ],
    };
    let mut mount_id: c_int = 0;
    // SAFETY: the path is a NUL-terminated empty string (with AT_EMPTY_PATH the kernel
    // uses `fd` itself); `buf` is a `struct file_handle` header followed by
    // `handle_bytes` writable bytes, and `mount_id` a writable int, all alive for the
    // whole call.
    let rc = unsafe {
        libc::name_to_handle_at(
            fd.as_raw_fd(),
            c"".as_ptr(),
            (&raw mut buf).cast::<libc::file_handle>(),
            &mut mount_id,
            flags,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let bytes = buf.f_handle.get(..buf.handle_bytes as usize).ok_or_else(|| {
        io::Error::other("name_to_handle_at reported a handle longer than MAX_HANDLE_SZ")
    })?;
    Ok(FileHandle { handle_type: buf.handle_type, bytes: bytes.to_vec() })
}

/// `open_by_handle_at(mount, handle, O_RDONLY | O_DIRECTORY | O_CLOEXEC)`; `mount` is any
/// descriptor on the handle's filesystem. Needs CAP_DAC_READ_SEARCH.
pub(super) fn open_dir_by_handle(
    mount: BorrowedFd<'_>,
    handle: &FileHandle,
) -> io::Result<OwnedFd> {
    let mut buf = HandleBuf {
        handle_bytes: 0,
        handle_type: handle.handle_type,
        f_handle: [0; MAX_HANDLE_SZ],
    };
    let Some(dest) = buf.f_handle.get_mut(..handle.bytes.len()) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    dest.copy_from_slice(&handle.bytes);
    buf.handle_bytes = handle.bytes.len() as c_uint;
    // SAFETY: `buf` is a `struct file_handle` whose `handle_bytes` bytes of handle are
    // initialised and inside the buffer; it and `mount` are alive for the whole call.
    let fd = unsafe {
        libc::open_by_handle_at(
            mount.as_raw_fd(),
            (&raw mut buf).cast::<libc::file_handle>(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a descriptor the kernel just opened for us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The filesystem id (`statfs.f_fsid`) of the object `fd` refers to, as the 8 bytes
/// fanotify puts in `fanotify_event_info_fid.fsid` (both are `int val[2]`).
pub(super) fn fsid(fd: BorrowedFd<'_>) -> io::Result<[u8; 8]> {
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `st` is writable memory of the type fstatfs fills, alive for the call.
    let rc = unsafe { libc::fstatfs(fd.as_raw_fd(), st.as_mut_ptr()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstatfs returned 0, so the kernel filled the whole struct.
    let st = unsafe { st.assume_init() };
    // SAFETY: `fsid_t` is `struct { int __val[2]; }`: 8 bytes without padding (transmute
    // checks the size at compile time), so every byte is initialised.
    let bytes: [u8; 8] = unsafe { std::mem::transmute::<libc::fsid_t, [u8; 8]>(st.f_fsid) };
    Ok(bytes)
}
