/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * What the BPF programs share with the agent: the records written to the EVENTS ring
 * buffer, the per-pod traffic counters and the exec history. The agent mirrors these
 * layouts with #[repr(C)] structs in agent/formats/src/bpf.rs; change both together.
 */
#ifndef OUTPOST_H
#define OUTPOST_H

#define OUTPOST_COMM_LEN 16
#define OUTPOST_FILENAME_LEN 256
/* argv, NUL-separated as in /proc/<pid>/cmdline, cut at this many bytes. */
#define OUTPOST_ARGS_LEN 256

enum outpost_event_kind {
	OUTPOST_EVENT_EXEC = 1,
	OUTPOST_EVENT_EXIT = 2,
	OUTPOST_EVENT_OOM_KILL = 3,
};

/* Every record starts with this. */
struct outpost_event_header {
	__u32 kind;      /* enum outpost_event_kind */
	__u32 tgid;      /* the process (host pid namespace) */
	__u32 pid;       /* the thread (host pid namespace) */
	__u32 ns_tgid;   /* the process's id in its own pid namespace (1: a container's init) */
	__u64 cgroup_id; /* the task's cgroup v2 id (inode of its cgroup2 directory) */
	__u64 ktime_ns;  /* bpf_ktime_get_boot_ns() */
	char comm[OUTPOST_COMM_LEN];
};

/* sched_process_exec: a process in a pod cgroup ran a new binary. */
struct outpost_exec_event {
	struct outpost_event_header header;
	__u32 uid;
	__u32 ppid;
	__u32 filename_len; /* bytes used in filename, without the NUL */
	__u32 args_len;     /* bytes used in args */
	char filename[OUTPOST_FILENAME_LEN];
	char args[OUTPOST_ARGS_LEN];
};

/* sched_process_exit of the last thread of a process in a pod cgroup. */
struct outpost_exit_event {
	struct outpost_event_header header;
	/* task->exit_code: (status & 0xff) << 8 for exit(status); the signal number
	 * (| 0x80 with a core dump) for a process killed by a signal. */
	__u32 exit_code;
	__u32 _pad;
};

/* oom/mark_victim: the OOM killer chose this process (any cgroup; the agent keeps the
 * ones in its pods). header.cgroup_id is the victim's cgroup, not the current task's. */
struct outpost_oom_kill_event {
	struct outpost_event_header header;
	__u32 uid;
	__u32 _pad;
};

/* Per pod cgroup (<pods cgroup>/pod<uid>, or a level deeper under its QoS class's),
 * in the POD_TRAFFIC per-CPU hash map, keyed by that cgroup's id. */
struct outpost_traffic {
	__u64 rx_bytes;
	__u64 rx_packets;
	__u64 tx_bytes;
	__u64 tx_packets;
};

/* The last exec of every process on the host (not only pods), in the EXEC_HISTORY LRU
 * hash keyed by tgid: who wrote a manifest, even after the writer exited. */
struct outpost_exec_info {
	__u64 ktime_ns;
	__u32 uid;
	__u32 args_len;
	char filename[OUTPOST_FILENAME_LEN];
	char args[OUTPOST_ARGS_LEN];
};

#endif
