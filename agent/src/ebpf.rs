//! eBPF: the kernel tells the agent about pod processes and traffic. The programs
//! (`agent-ebpf/src/outpost.bpf.c`, compiled object embedded) report execs, exits and OOM
//! kills of pod processes into a ring buffer, and count each pod's packets in a pinned
//! per-CPU map. Only BTF tracepoints and cgroup_skb programs: fentry/fexit, LSM and
//! kprobes are not available on the kernels Outpost targets.
//!
//! Loading is best effort: without BPF (not root, no BTF, lockdown, an old kernel) the
//! agent says so once and runs on containerd's events alone; nothing else changes.
//!
//! - `records`: the records' layouts and their parser (pure: the crate `outpost-formats`).
//! - `mounts`: tracefs, bpffs and cgroup2, mounted if absent.
//! - `cgroups`: cgroup id → pod UID and container id.
//! - `clock`: the records' boot-clock times as wall-clock times.
//! - `audit`: the bounded per-pod exec audit log (pure).
//! - `reader`: the ring buffer, read as it becomes readable.

pub mod audit;
pub mod cgroups;
pub mod clock;
pub mod mounts;
mod reader;

/// The records the BPF programs write, and their parser.
pub use outpost_formats::bpf as records;

use std::fs::File;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use aya::maps::{HashMap as BpfHashMap, MapData, MapInfo, MapType, PerCpuHashMap, RingBuf};
use aya::programs::{BtfTracePoint, CgroupAttachMode, CgroupSkb, CgroupSkbAttachType};
use aya::{Btf, Ebpf, EbpfError, EbpfLoader};

use self::audit::{AuditLog, Entry};
use self::cgroups::Cgroups;
pub use self::reader::Observed;
use self::records::{ExecInfoValue, ExecRecord, Traffic, TrafficValue};
use crate::runtime::cgroups::Layout;
use outpost_core::qos::QosClass;

/// The compiled programs (`cargo xtask ebpf` rebuilds them).
static OBJECT: &[u8] = aya::include_bytes_aligned!("../../agent-ebpf/outpost.bpf.o");

/// The kernel's BTF: aya relocates the programs against it, and tracepoints are found in it.
const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";
/// Where the traffic counters are pinned, so that they survive an agent restart.
pub const PIN_DIR: &str = "/sys/fs/bpf/outpost";
const TRAFFIC_MAP: &str = "POD_TRAFFIC";
const EVENTS_MAP: &str = "EVENTS";
const EXEC_HISTORY_MAP: &str = "EXEC_HISTORY";
/// Program name → BTF tracepoint.
const TRACEPOINTS: [(&str, &str); 3] = [
    ("sched_process_exec", "sched_process_exec"),
    ("sched_process_exit", "sched_process_exit"),
    ("oom_mark_victim", "mark_victim"),
];
const SKB_PROGRAMS: [(&str, CgroupSkbAttachType); 2] =
    [("pod_ingress", CgroupSkbAttachType::Ingress), ("pod_egress", CgroupSkbAttachType::Egress)];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Mounts(#[from] mounts::Error),
    #[error("cannot read the pods cgroup {}", path.display())]
    PodRoot {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create the BPF pin directory {PIN_DIR}")]
    PinDir(#[source] std::io::Error),
    #[error("the kernel offers no BTF ({KERNEL_BTF}): it needs CONFIG_DEBUG_INFO_BTF")]
    NoBtf(#[source] std::io::Error),
    #[error("cannot parse the kernel's BTF ({KERNEL_BTF})")]
    Btf(#[source] aya::BtfError),
    #[error(
        "cannot load the BPF programs and maps (needs root or CAP_BPF+CAP_PERFMON, and no kernel lockdown)"
    )]
    Load(#[source] EbpfError),
    #[error("the BPF object has no program {0}: agent-ebpf/outpost.bpf.o does not match the agent")]
    NoProgram(&'static str),
    #[error("the BPF object has no map {0}: agent-ebpf/outpost.bpf.o does not match the agent")]
    NoMap(&'static str),
    #[error("cannot load or attach the BPF program {name} ({attach})")]
    Program {
        name: &'static str,
        attach: String,
        #[source]
        source: aya::programs::ProgramError,
    },
    #[error("the BPF map {name} is not what the agent expects")]
    Map {
        name: &'static str,
        #[source]
        source: aya::maps::MapError,
    },
}

/// The loaded programs (attached while this lives) and the maps the agent reads.
pub struct Kernel {
    _programs: Ebpf,
    traffic: Mutex<PerCpuHashMap<MapData, u64, TrafficValue>>,
    exec_history: Mutex<BpfHashMap<MapData, u32, ExecInfoValue>>,
    events: Mutex<Option<RingBuf<MapData>>>,
    cgroups: Arc<Cgroups>,
    mounts: mounts::Mounts,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel").field("mounts", &self.mounts).finish_non_exhaustive()
    }
}

impl Kernel {
    /// Mounts what is missing, loads the programs and attaches them to the pods cgroup
    /// of `layout`.
    pub fn load(layout: &Layout) -> Result<Kernel, Error> {
        let pods = layout.pods().path(layout.driver);
        let burstable = layout.qos(QosClass::Burstable).path(layout.driver);
        let besteffort = layout.qos(QosClass::BestEffort).path(layout.driver);
        let mounts = mounts::ensure(&pods, [&burstable, &besteffort])?;
        let pod_root = &mounts.pod_root;
        let id = |path: &PathBuf| {
            std::fs::metadata(path)
                .map(|m| m.ino())
                .map_err(|source| Error::PodRoot { path: path.clone(), source })
        };
        let root_id = id(pod_root)?;
        let [burstable_id, besteffort_id] = [id(&mounts.qos[0])?, id(&mounts.qos[1])?];
        // Its depth below the cgroup2 root.
        let root_level = u32::try_from(layout.pods().components().len()).unwrap_or(1);
        std::fs::create_dir_all(PIN_DIR).map_err(Error::PinDir)?;
        // aya's loader parses the kernel's BTF itself (it cannot be handed one without
        // having parsed its own first), and without one it relocates nothing.
        std::fs::metadata(KERNEL_BTF).map_err(Error::NoBtf)?;
        let pin = Path::new(PIN_DIR).join(TRAFFIC_MAP);
        if pin.exists() && !compatible_traffic_pin(&pin) {
            tracing::info!(pin = %pin.display(), "the pinned traffic map has another layout; starting it anew");
            let _ = std::fs::remove_file(&pin);
        }
        let load = || {
            EbpfLoader::new()
                .override_global("pod_root_cgroup_id", &root_id, true)
                .override_global("pod_root_level", &root_level, true)
                .override_global("burstable_cgroup_id", &burstable_id, true)
                .override_global("besteffort_cgroup_id", &besteffort_id, true)
                .map_pin_path(TRAFFIC_MAP, pin.as_path())
                .load(OBJECT)
        };
        let mut programs = match load() {
            Ok(programs) => programs,
            // A pin this check could not judge: start it anew, once.
            Err(EbpfError::MapError(e)) if pin.exists() => {
                tracing::info!(error = %e, pin = %pin.display(), "cannot use the pinned traffic map; starting it anew");
                let _ = std::fs::remove_file(&pin);
                load().map_err(Error::Load)?
            }
            Err(e) => return Err(Error::Load(e)),
        };
        // The loader's parsed BTF went with it. The tracepoints' types are looked up in a
        // second parse made only now, so that the two (each several times the 5 MB file)
        // are never held at once: together they were the agent's peak memory.
        crate::host::allocator::release_free_memory();
        let btf = Btf::from_sys_fs().map_err(Error::Btf)?;
        attach_tracepoints(&mut programs, &btf)?;
        drop(btf);
        let cgroup = File::open(pod_root)
            .map_err(|source| Error::PodRoot { path: pod_root.clone(), source })?;
        let mode = skb_attach_mode();
        for (name, attach_type) in SKB_PROGRAMS {
            let attach = format!("cgroup {}", pod_root.display());
            let program: &mut CgroupSkb = programs
                .program_mut(name)
                .ok_or(Error::NoProgram(name))?
                .try_into()
                .map_err(|source| program_error(name, &attach, source))?;
            program.load().map_err(|source| program_error(name, &attach, source))?;
            // Several agents may share the pod root (tests do): each adds its own.
            program
                .attach(&cgroup, attach_type, mode)
                .map_err(|source| program_error(name, &attach, source))?;
        }
        let events = RingBuf::try_from(take(&mut programs, EVENTS_MAP)?)
            .map_err(|source| Error::Map { name: EVENTS_MAP, source })?;
        let traffic = PerCpuHashMap::try_from(take(&mut programs, TRAFFIC_MAP)?)
            .map_err(|source| Error::Map { name: TRAFFIC_MAP, source })?;
        let exec_history = BpfHashMap::try_from(take(&mut programs, EXEC_HISTORY_MAP)?)
            .map_err(|source| Error::Map { name: EXEC_HISTORY_MAP, source })?;
        Ok(Kernel {
            _programs: programs,
            traffic: Mutex::new(traffic),
            exec_history: Mutex::new(exec_history),
            events: Mutex::new(Some(events)),
            cgroups: Arc::new(Cgroups::new(mounts.cgroup2.clone(), layout.clone())),
            mounts,
        })
    }

    /// Each pod cgroup's traffic counters (summed over the CPUs), by cgroup id.
    pub fn traffic(&self) -> Vec<(u64, Traffic)> {
        let Ok(map) = self.traffic.lock() else { return Vec::new() };
        map.iter()
            .filter_map(Result::ok)
            .map(|(id, per_cpu)| {
                let mut sum = Traffic::default();
                for value in per_cpu.iter() {
                    sum.add(&Traffic::from_value(*value));
                }
                (id, sum)
            })
            .collect()
    }

    /// The last binary process `tgid` ran (any process on the host, while the LRU map
    /// keeps it: the writer of a manifest, say, even after it exited).
    pub fn exec_of(&self, tgid: u32) -> Option<ExecRecord> {
        let map = self.exec_history.lock().ok()?;
        map.get(&tgid, 0).ok().map(|value| records::exec_info(&value))
    }

    pub fn cgroups(&self) -> &Arc<Cgroups> {
        &self.cgroups
    }

    pub fn mounts(&self) -> &mounts::Mounts {
        &self.mounts
    }
}

/// How the skb programs attach so that several agents' programs run side by side. aya
/// attaches with a BPF link from Linux 5.7 on, and a cgroup link is always "multi" while
/// the kernel refuses any attach flag on it (EINVAL): flags 0, which aya calls `Single`.
/// Before 5.7 aya uses BPF_PROG_ATTACH, where `Single` would replace another agent's
/// program: `AllowMultiple` there.
fn skb_attach_mode() -> CgroupAttachMode {
    let links = aya::util::KernelVersion::current()
        .is_ok_and(|v| v >= aya::util::KernelVersion::new(5, 7, 0));
    if links { CgroupAttachMode::Single } else { CgroupAttachMode::AllowMultiple }
}

/// Loads and attaches the BTF tracepoint programs; `btf` is the kernel's, where each
/// tracepoint's type is.
fn attach_tracepoints(programs: &mut Ebpf, btf: &Btf) -> Result<(), Error> {
    for (name, tracepoint) in TRACEPOINTS {
        let program: &mut BtfTracePoint = programs
            .program_mut(name)
            .ok_or(Error::NoProgram(name))?
            .try_into()
            .map_err(|source| program_error(name, tracepoint, source))?;
        program.load(tracepoint, btf).map_err(|source| program_error(name, tracepoint, source))?;
        program.attach().map_err(|source| program_error(name, tracepoint, source))?;
    }
    Ok(())
}

fn program_error(name: &'static str, attach: &str, source: aya::programs::ProgramError) -> Error {
    Error::Program { name, attach: attach.to_owned(), source }
}

fn take(programs: &mut Ebpf, name: &'static str) -> Result<aya::maps::Map, Error> {
    programs.take_map(name).ok_or(Error::NoMap(name))
}

/// Whether the map pinned at `pin` is the per-CPU LRU hash of u64 → `outpost_traffic`
/// this agent's programs write.
fn compatible_traffic_pin(pin: &Path) -> bool {
    let Ok(info) = MapInfo::from_pin(pin) else { return false };
    matches!(info.map_type(), Ok(MapType::LruPerCpuHash))
        && info.key_size() as usize == size_of::<u64>()
        && info.value_size() as usize == size_of::<Traffic>()
}

/// What the rest of the agent shares about BPF: the loaded programs' maps (if loaded)
/// and the exec audit log the pod workers fill.
#[derive(Debug, Clone, Default)]
pub struct Handle(Arc<Shared>);

#[derive(Debug, Default)]
struct Shared {
    kernel: Option<Kernel>,
    audit: Mutex<AuditLog>,
}

impl Handle {
    /// Loads the programs (`enabled`: `--ebpf`), or says once why the agent runs without.
    pub fn start(enabled: bool, layout: &Layout) -> Handle {
        if !enabled {
            tracing::info!(
                "eBPF disabled (--ebpf=false): container exits come from containerd's events alone"
            );
            return Handle::default();
        }
        // Loading parses the kernel's BTF (twice: aya's loader reads it too), the agent's
        // peak memory (B5's VmHWM at start). The code the start ran so far is not needed
        // for it, so it is not resident beside it (`outpost_host::code_pages`).
        if let Err(e) = crate::host::code_pages::release() {
            tracing::debug!(error = %e, "cannot release the executable's pages");
        }
        let loaded = Kernel::load(layout);
        // Megabytes the allocator would otherwise keep for the agent's whole life.
        crate::host::allocator::release_free_memory();
        match loaded {
            Ok(kernel) => {
                tracing::info!(
                    cgroup2 = %kernel.mounts.cgroup2.display(),
                    pod_root = %kernel.mounts.pod_root.display(),
                    "eBPF programs loaded: exits, execs, OOM kills and pod traffic come from the kernel"
                );
                Handle::loaded(kernel)
            }
            Err(e) => {
                let euid = nix::unistd::geteuid();
                let hint = if euid.is_root() { "" } else { " (the agent does not run as root)" };
                tracing::warn!(
                    error = %crate::error_chain::describe(&e),
                    "eBPF is unavailable{hint}; running on containerd's events alone (no kernel exits, exec audit or pod traffic metrics)"
                );
                Handle::default()
            }
        }
    }

    pub fn loaded(kernel: Kernel) -> Handle {
        Handle(Arc::new(Shared { kernel: Some(kernel), audit: Mutex::default() }))
    }

    pub fn kernel(&self) -> Option<&Kernel> {
        self.0.kernel.as_ref()
    }

    pub fn is_loaded(&self) -> bool {
        self.0.kernel.is_some()
    }

    /// Starts reading the ring buffer (once): `deliver` gets the events of pod
    /// containers, resolved to their pod and container, in the order the kernel wrote
    /// them, until the returned task is aborted.
    pub fn watch(
        &self,
        deliver: impl FnMut(Observed) + Send + 'static,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let kernel = self.kernel()?;
        let ring = kernel.events.lock().ok()?.take()?;
        match reader::spawn(ring, kernel.cgroups.clone(), deliver) {
            Ok(reader) => Some(reader),
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch the BPF ring buffer; running on containerd's events alone");
                None
            }
        }
    }

    /// Adds an entry to pod `uid`'s exec audit log.
    pub fn record(&self, uid: &str, namespace: &str, name: &str, entry: Entry) {
        if let Ok(mut audit) = self.0.audit.lock() {
            audit.record(uid, namespace, name, entry);
        }
    }

    /// Pod `uid`'s exec audit log, oldest first.
    pub fn audit(&self, uid: &str) -> Vec<Entry> {
        let Ok(audit) = self.0.audit.lock() else { return Vec::new() };
        audit.get(uid).map(|log| log.entries.iter().cloned().collect()).unwrap_or_default()
    }

    /// Execs per (namespace, pod, container).
    pub fn exec_counts(&self) -> Vec<(String, String, String, u64)> {
        let Ok(audit) = self.0.audit.lock() else { return Vec::new() };
        audit
            .pods()
            .flat_map(|log| {
                log.execs.iter().map(|(container, n)| {
                    (log.namespace.clone(), log.name.clone(), container.clone(), *n)
                })
            })
            .collect()
    }

    /// Each pod's traffic counters, by pod UID.
    pub fn pod_traffic(&self) -> Vec<(String, Traffic)> {
        let Some(kernel) = self.kernel() else { return Vec::new() };
        let counters = kernel.traffic();
        let ids: Vec<u64> = counters.iter().map(|(id, _)| *id).collect();
        let owners = kernel.cgroups.resolve_all(&ids);
        counters
            .into_iter()
            .zip(owners)
            .filter_map(|((_, traffic), owner)| {
                owner.filter(|o| o.container_id.is_none()).map(|o| (o.pod_uid, traffic))
            })
            .collect()
    }

    /// The agent runs pod `uid`: events of its cgroups are resolved.
    pub fn track_pod(&self, uid: &str) {
        if let Some(kernel) = self.kernel() {
            kernel.cgroups.track(uid);
        }
    }

    /// The pod is gone: its audit log and cached cgroups go too.
    pub fn forget_pod(&self, uid: &str) {
        if let Ok(mut audit) = self.0.audit.lock() {
            audit.remove(uid);
        }
        if let Some(kernel) = self.kernel() {
            kernel.cgroups.forget_pod(uid);
        }
    }
}

/// The manifest audit asks about writers that exited before `/proc` could be read.
impl crate::audit::ExecHistory for Handle {
    fn exec_of(&self, tgid: u32) -> Option<crate::audit::ExecRecord> {
        let record = self.kernel()?.exec_of(tgid)?;
        Some(crate::audit::ExecRecord {
            filename: record.filename,
            argv: record.argv,
            uid: record.uid,
            at: clock::wall_time(record.ktime_ns),
        })
    }
}
