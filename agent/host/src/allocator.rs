//! glibc's malloc, set for an agent that lives long and mostly waits.
//!
//! - **One arena.** glibc gives each thread that allocates an arena of its own (up to 8
//!   per core), and each arena keeps what is freed into it. The agent's threads (two
//!   tokio workers, blocking threads, the eviction sampler) take turns more than they
//!   contend, so one arena serves them all.
//! - **A fixed mmap threshold.** glibc raises its threshold to the size of the largest
//!   mapped block freed so far (up to 32 MiB). After the kernel's BTF is read (a 5 MB
//!   buffer) at the BPF programs' loading, every later buffer below that size would come
//!   from the heap and fragment it: the second BTF parse then peaked 4 MiB higher than
//!   the first. Fixed at glibc's own starting value, large blocks are always mapped on
//!   their own and go back to the kernel when freed.
//!
//! `MALLOC_ARENA_MAX` or `MALLOC_MMAP_THRESHOLD_` in the environment (e.g. a systemd
//! unit's `Environment=`) win over these.

/// How many arenas the agent's threads share.
const ARENAS: i32 = 1;
/// Blocks from this size up are mapped on their own (glibc's default starting value).
const MMAP_THRESHOLD: i32 = 128 * 1024;

/// Sets malloc up as above. Call it first thing in `main`, before any other thread exists:
/// glibc fixes the arena limit when a second thread first allocates, and a later call
/// changes nothing.
#[cfg(target_env = "gnu")]
pub fn configure() {
    let settings = [
        ("MALLOC_ARENA_MAX", libc::M_ARENA_MAX, ARENAS),
        ("MALLOC_MMAP_THRESHOLD_", libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD),
    ];
    for (variable, param, value) in settings {
        if std::env::var_os(variable).is_some() {
            continue;
        }
        #[allow(unsafe_code)]
        // SAFETY: mallopt changes glibc's allocator settings under its own lock; it takes
        // no pointers.
        let set = unsafe { libc::mallopt(param, value) };
        if set != 1 {
            tracing::warn!(
                variable,
                value,
                "glibc refused a malloc setting; the agent runs with glibc's default"
            );
        }
    }
}

#[cfg(not(target_env = "gnu"))]
pub fn configure() {}

/// Hands the allocator's free memory back to the kernel (glibc's `malloc_trim`): after a
/// burst such as the BPF programs' loading, which parses the kernel's BTF.
#[cfg(target_env = "gnu")]
pub fn release_free_memory() {
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim only walks glibc's own heap state under its locks; it takes no
    // pointers and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(target_env = "gnu"))]
pub fn release_free_memory() {}
