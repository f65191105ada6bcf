// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Outpost's BPF programs: what the processes of pods do (exec, exit, OOM kill) and how
 * much traffic each pod sends and receives. Only BTF tracepoints and cgroup programs:
 * fentry/fexit, LSM and kprobes are not available on the kernels Outpost targets.
 *
 * Built by `cargo xtask ebpf` (CO-RE: kernel.h declares the fields read, which libbpf
 * finds in the running kernel's BTF at load); the object is committed as
 * agent-ebpf/outpost.bpf.o and embedded in the agent.
 */
#include "kernel.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "outpost.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the agent at load: the cgroup v2 id of the pods cgroup (<cgroup-root>/kubepods)
 * and its depth below the cgroup2 root, and the ids of its Burstable and BestEffort QoS
 * cgroups (a Guaranteed pod's cgroup is right under the pods cgroup, the others' one
 * level deeper). Zero: nothing is a pod. */
const volatile __u64 pod_root_cgroup_id = 0;
const volatile __u32 pod_root_level = 0;
const volatile __u64 burstable_cgroup_id = 0;
const volatile __u64 besteffort_cgroup_id = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} EVENTS SEC(".maps");

/* Pinned, so a pod's counters outlive an agent restart as the pod does. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct outpost_traffic);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} POD_TRAFFIC SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct outpost_exec_info);
} EXEC_HISTORY SEC(".maps");

/* outpost_exec_info is too large for the BPF stack: it is built here. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct outpost_exec_info);
} EXEC_SCRATCH SEC(".maps");

/* Whether the current task runs in a pod (below the pod root cgroup). */
static __always_inline bool current_in_pod(void)
{
	return pod_root_cgroup_id != 0 &&
	       bpf_get_current_ancestor_cgroup_id(pod_root_level) == pod_root_cgroup_id;
}

/* The task's process id as its own pid namespace numbers it. */
static __always_inline __u32 ns_tgid(struct task_struct *task)
{
	struct pid *pid = BPF_CORE_READ(task, group_leader, thread_pid);
	unsigned int level = BPF_CORE_READ(pid, level);
	int nr = 0;

	bpf_core_read(&nr, sizeof(nr), &pid->numbers[level].nr);
	return nr;
}

static __always_inline void fill_header(struct outpost_event_header *h, __u32 kind,
					struct task_struct *task, __u64 cgroup_id)
{
	h->kind = kind;
	h->tgid = BPF_CORE_READ(task, tgid);
	h->pid = BPF_CORE_READ(task, pid);
	h->ns_tgid = ns_tgid(task);
	h->cgroup_id = cgroup_id;
	h->ktime_ns = bpf_ktime_get_boot_ns();
	BPF_CORE_READ_STR_INTO(&h->comm, task, comm);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(sched_process_exec, struct task_struct *task, pid_t old_pid,
	     struct linux_binprm *bprm)
{
	__u32 zero = 0;
	struct outpost_exec_info *info = bpf_map_lookup_elem(&EXEC_SCRATCH, &zero);
	if (!info)
		return 0;

	info->ktime_ns = bpf_ktime_get_boot_ns();
	info->uid = (__u32)bpf_get_current_uid_gid();
	long filename_len =
		bpf_probe_read_kernel_str(info->filename, sizeof(info->filename),
					  BPF_CORE_READ(bprm, filename));
	if (filename_len < 0) {
		info->filename[0] = '\0';
		filename_len = 1;
	}

	/* The new image's argv, NUL-separated, cut at OUTPOST_ARGS_LEN bytes. */
	struct mm_struct *mm = BPF_CORE_READ(task, mm);
	unsigned long arg_start = BPF_CORE_READ(mm, arg_start);
	unsigned long args_len = BPF_CORE_READ(mm, arg_end) - arg_start;
	if (args_len > OUTPOST_ARGS_LEN)
		args_len = OUTPOST_ARGS_LEN;
	if (bpf_probe_read_user(info->args, args_len, (const void *)arg_start) != 0)
		args_len = 0;
	info->args_len = args_len;

	__u32 tgid = BPF_CORE_READ(task, tgid);
	bpf_map_update_elem(&EXEC_HISTORY, &tgid, info, BPF_ANY);

	if (!current_in_pod())
		return 0;
	struct outpost_exec_event *e = bpf_ringbuf_reserve(&EVENTS, sizeof(*e), 0);
	if (!e)
		return 0;
	fill_header(&e->header, OUTPOST_EVENT_EXEC, task, bpf_get_current_cgroup_id());
	e->uid = info->uid;
	e->ppid = BPF_CORE_READ(task, real_parent, tgid);
	e->filename_len = filename_len - 1;
	e->args_len = args_len;
	bpf_probe_read_kernel(e->filename, sizeof(e->filename), info->filename);
	bpf_probe_read_kernel(e->args, sizeof(e->args), info->args);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit, struct task_struct *task)
{
	if (!current_in_pod())
		return 0;
	/* Only the last thread's exit ends the process. */
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0;
	struct outpost_exit_event *e = bpf_ringbuf_reserve(&EVENTS, sizeof(*e), 0);
	if (!e)
		return 0;
	fill_header(&e->header, OUTPOST_EVENT_EXIT, task, bpf_get_current_cgroup_id());
	e->exit_code = BPF_CORE_READ(task, exit_code);
	e->_pad = 0;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* The OOM killer runs in whichever task ran out: the victim's cgroup is read from it. */
SEC("tp_btf/mark_victim")
int BPF_PROG(oom_mark_victim, struct task_struct *task)
{
	struct outpost_oom_kill_event *e = bpf_ringbuf_reserve(&EVENTS, sizeof(*e), 0);
	if (!e)
		return 0;
	fill_header(&e->header, OUTPOST_EVENT_OOM_KILL, task,
		    BPF_CORE_READ(task, cgroups, dfl_cgrp, kn, id));
	e->uid = BPF_CORE_READ(task, cred, uid.val);
	e->_pad = 0;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* Counts a packet against the pod whose socket sent or receives it; never drops. */
static __always_inline int count_packet(struct __sk_buff *skb, bool ingress)
{
	__u64 pod = bpf_skb_ancestor_cgroup_id(skb, pod_root_level + 1);
	if (pod != 0 && (pod == burstable_cgroup_id || pod == besteffort_cgroup_id))
		pod = bpf_skb_ancestor_cgroup_id(skb, pod_root_level + 2);
	if (pod == 0)
		return 1;
	struct outpost_traffic *t = bpf_map_lookup_elem(&POD_TRAFFIC, &pod);
	if (!t) {
		struct outpost_traffic zero = {};
		bpf_map_update_elem(&POD_TRAFFIC, &pod, &zero, BPF_NOEXIST);
		t = bpf_map_lookup_elem(&POD_TRAFFIC, &pod);
		if (!t)
			return 1;
	}
	if (ingress) {
		t->rx_bytes += skb->len;
		t->rx_packets += 1;
	} else {
		t->tx_bytes += skb->len;
		t->tx_packets += 1;
	}
	return 1;
}

SEC("cgroup_skb/ingress")
int pod_ingress(struct __sk_buff *skb)
{
	return count_packet(skb, true);
}

SEC("cgroup_skb/egress")
int pod_egress(struct __sk_buff *skb)
{
	return count_packet(skb, false);
}
