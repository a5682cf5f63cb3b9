// The record the oom/mark_victim BPF program sends through its ring buffer; shared by the BPF
// program (native/bpf/oom_victim.bpf.c) and the loader (native/oom_ebpf.cc), so keep it plain C.
#ifndef KTS_OOM_VICTIM_H
#define KTS_OOM_VICTIM_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define KTS_OOM_COMM_LEN 16
/* The victim's memory cgroup path as kernfs names, leaf first, at most this many levels. */
#define KTS_OOM_CGROUP_LEVELS 8
#define KTS_OOM_CGROUP_NAME_LEN 128

// Flags of struct kts_oom_victim.flags.
#define KTS_OOM_HAVE_TASK 0x1 /* the tracepoint passed the victim task (kernel >= 6.8) */
#define KTS_OOM_HAVE_MEMCG 0x2 /* memcg_ino/memcg_* are set */
#define KTS_OOM_HAVE_MM 0x4 /* the victim still had an mm: the rss figures are set */
#define KTS_OOM_CGROUP_TRUNCATED 0x8 /* the cgroup path is deeper than KTS_OOM_CGROUP_LEVELS */

struct kts_oom_victim {
  __u64 ktime_ns;          /* bpf_ktime_get_ns() at mark_victim (CLOCK_MONOTONIC) */
  __u64 memcg_ino;         /* kernfs id = inode number of the victim's memory cgroup dir */
  __u64 total_vm_pages;
  __u64 anon_rss_pages;
  __u64 file_rss_pages;
  __u64 shmem_rss_pages;
  __u64 swap_ents;
  __u64 pgtables_bytes;
  __u64 memcg_usage_pages; /* the victim memcg's page_counter usage and max */
  __u64 memcg_limit_pages;
  __u32 pid;               /* thread group id (the process) */
  __u32 tid;               /* the marked thread */
  __u32 uid;
  __s32 oom_score_adj;
  __u32 flags;
  __u32 cgroup_levels;      /* how many of cgroup_names are set */
  char comm[KTS_OOM_COMM_LEN];
  char cgroup_names[KTS_OOM_CGROUP_LEVELS][KTS_OOM_CGROUP_NAME_LEN];
};

#endif
