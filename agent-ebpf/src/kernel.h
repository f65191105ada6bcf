/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The kernel types the BPF programs read, and only the fields they read, instead of a
 * vmlinux.h dumped from the building machine's kernel. Every struct is compiled with
 * preserve_access_index, so each field access is a CO-RE relocation that libbpf (aya)
 * resolves against the running kernel's BTF by name at load: the offsets written here do
 * not matter, and the object is the same whatever kernel it is built on.
 *
 * The UAPI parts (integer types, map types, flags, struct __sk_buff) are the kernel's
 * stable ABI: the verifier rewrites __sk_buff accesses by offset, so its leading fields
 * keep their UAPI layout.
 */
#ifndef OUTPOST_KERNEL_H
#define OUTPOST_KERNEL_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0
typedef int pid_t;

/* include/uapi/linux/bpf.h */
enum bpf_map_type {
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_LRU_PERCPU_HASH = 10,
	BPF_MAP_TYPE_RINGBUF = 27,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
};

/* The leading fields of the cgroup_skb programs' context, in their UAPI order. */
struct __sk_buff {
	__u32 len;
	__u32 pkt_type;
	__u32 mark;
	__u32 queue_mapping;
	__u32 protocol;
};

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

typedef struct {
	int counter;
} atomic_t;

typedef struct {
	unsigned int val;
} kuid_t;

struct pid_namespace;

/* Its size is the kernel's: pid->numbers[level] is indexed with it. */
struct upid {
	int nr;
	struct pid_namespace *ns;
};

struct pid {
	unsigned int level;
	struct upid numbers[];
};

struct mm_struct {
	unsigned long arg_start;
	unsigned long arg_end;
};

struct signal_struct {
	atomic_t live;
};

struct kernfs_node {
	__u64 id;
};

struct cgroup {
	struct kernfs_node *kn;
};

struct css_set {
	struct cgroup *dfl_cgrp;
};

struct cred {
	kuid_t uid;
};

struct task_struct {
	int exit_code;
	pid_t pid;
	pid_t tgid;
	struct task_struct *real_parent;
	struct task_struct *group_leader;
	struct pid *thread_pid;
	struct mm_struct *mm;
	const struct cred *cred;
	char comm[16];
	struct signal_struct *signal;
	struct css_set *cgroups;
};

struct linux_binprm {
	const char *filename;
};

#pragma clang attribute pop

#endif
