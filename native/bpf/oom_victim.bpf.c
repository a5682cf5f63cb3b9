// CO-RE program on the oom/mark_victim raw tracepoint: for every task the OOM killer marks as
// its victim, send pid, comm, uid, oom_score_adj, rss figures and the victim's memory cgroup
// (inode, path, usage/limit) to user space through a ring buffer. Raw tracepoints load on
// kernels locked down against kprobes/fentry, and need no tracefs.
//
// Fields that moved between kernel versions are read through "___flavor" structs, so the
// program compiles against any host's vmlinux.h and relocates on the running kernel.
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "oom_victim.h"

// bpf_probe_read_kernel is GPL-only, so the program must carry a GPL-compatible license.
char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 256 * 1024);
} events SEC(".maps");

// >= 6.8: mark_victim(task, uid) and a uid field in its event; before: mark_victim(pid).
struct trace_event_raw_mark_victim___new {
  unsigned int uid;
} __attribute__((preserve_access_index));

// >= 6.2: rss counters are percpu_counters; before: atomic longs in struct mm_rss_stat.
struct mm_struct___new {
  struct percpu_counter rss_stat[4];
} __attribute__((preserve_access_index));
struct mm_rss_stat___old {
  atomic_long_t count[4];
} __attribute__((preserve_access_index));
struct mm_struct___old {
  struct mm_rss_stat___old rss_stat;
} __attribute__((preserve_access_index));

// >= 6.15: kernfs_node.parent became __parent.
struct kernfs_node___new {
  struct kernfs_node *__parent;
} __attribute__((preserve_access_index));
struct kernfs_node___old {
  struct kernfs_node *parent;
} __attribute__((preserve_access_index));

// enum mm_counter_type values, stable since 4.x.
#define KTS_MM_FILEPAGES 0
#define KTS_MM_ANONPAGES 1
#define KTS_MM_SWAPENTS 2
#define KTS_MM_SHMEMPAGES 3

static __always_inline __u64 positive(long v) { return v < 0 ? 0 : (__u64)v; }

static __always_inline void read_mm(struct kts_oom_victim *e, struct task_struct *task) {
  struct mm_struct *mm = BPF_CORE_READ(task, mm);
  if (!mm) return;
  e->flags |= KTS_OOM_HAVE_MM;
  e->total_vm_pages = BPF_CORE_READ(mm, total_vm);
  e->pgtables_bytes = positive(BPF_CORE_READ(mm, pgtables_bytes.counter));
  if (bpf_core_field_exists(((struct mm_struct___new *)0)->rss_stat[0].count)) {
    // The approximate percpu_counter value, as the tracepoint itself reports it.
    struct mm_struct___new *m = (void *)mm;
    e->file_rss_pages = positive(BPF_CORE_READ(m, rss_stat[KTS_MM_FILEPAGES].count));
    e->anon_rss_pages = positive(BPF_CORE_READ(m, rss_stat[KTS_MM_ANONPAGES].count));
    e->swap_ents = positive(BPF_CORE_READ(m, rss_stat[KTS_MM_SWAPENTS].count));
    e->shmem_rss_pages = positive(BPF_CORE_READ(m, rss_stat[KTS_MM_SHMEMPAGES].count));
  } else {
    struct mm_struct___old *m = (void *)mm;
    e->file_rss_pages = positive(BPF_CORE_READ(m, rss_stat.count[KTS_MM_FILEPAGES].counter));
    e->anon_rss_pages = positive(BPF_CORE_READ(m, rss_stat.count[KTS_MM_ANONPAGES].counter));
    e->swap_ents = positive(BPF_CORE_READ(m, rss_stat.count[KTS_MM_SWAPENTS].counter));
    e->shmem_rss_pages = positive(BPF_CORE_READ(m, rss_stat.count[KTS_MM_SHMEMPAGES].counter));
  }
}

static __always_inline struct kernfs_node *kn_parent(struct kernfs_node *kn) {
  if (bpf_core_field_exists(((struct kernfs_node___new *)0)->__parent)) {
    return BPF_CORE_READ((struct kernfs_node___new *)kn, __parent);
  }
  return BPF_CORE_READ((struct kernfs_node___old *)kn, parent);
}

static __always_inline void read_memcg(struct kts_oom_victim *e, struct task_struct *task) {
  struct css_set *cgroups = BPF_CORE_READ(task, cgroups);
  if (!cgroups) return;
  // The memory controller's index depends on the kernel config: relocate it.
  int id = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);
  struct cgroup_subsys_state *css = NULL;
  if (id < 0 || id >= 32) return;
  bpf_core_read(&css, sizeof(css), &cgroups->subsys[id]);
  if (!css) return;
  e->flags |= KTS_OOM_HAVE_MEMCG;
  struct kernfs_node *kn = BPF_CORE_READ(css, cgroup, kn);
  e->memcg_ino = BPF_CORE_READ(kn, id);
  // css is the first member of struct mem_cgroup.
  struct mem_cgroup *memcg = (struct mem_cgroup *)css;
  e->memcg_usage_pages = positive(BPF_CORE_READ(memcg, memory.usage.counter));
  e->memcg_limit_pages = BPF_CORE_READ(memcg, memory.max);
  // The path, leaf first; the hierarchy's root (no parent) has no name of its own.
#pragma unroll
  for (int i = 0; i < KTS_OOM_CGROUP_LEVELS; i++) {
    if (!kn) return;
    struct kernfs_node *parent = kn_parent(kn);
    if (!parent) return;
    const char *name = BPF_CORE_READ(kn, name);
    bpf_probe_read_kernel_str(e->cgroup_names[i], KTS_OOM_CGROUP_NAME_LEN, name);
    e->cgroup_levels = i + 1;
    kn = parent;
  }
  if (kn && kn_parent(kn)) e->flags |= KTS_OOM_CGROUP_TRUNCATED;
}

SEC("raw_tp/mark_victim")
int oom_mark_victim(__u64 *ctx) {
  struct kts_oom_victim *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) return 0;
  // Ring buffer memory is not zeroed, and the record is too big for an inline memset: clear
  // the scalars; names are read only up to cgroup_levels and always NUL-terminated.
  e->memcg_ino = e->total_vm_pages = e->anon_rss_pages = e->file_rss_pages = 0;
  e->shmem_rss_pages = e->swap_ents = e->pgtables_bytes = 0;
  e->memcg_usage_pages = e->memcg_limit_pages = 0;
  e->pid = e->tid = e->uid = 0;
  e->oom_score_adj = 0;
  e->flags = e->cgroup_levels = 0;
  e->comm[0] = 0;
  e->ktime_ns = bpf_ktime_get_ns();
  if (bpf_core_field_exists(((struct trace_event_raw_mark_victim___new *)0)->uid)) {
    struct task_struct *task = (struct task_struct *)ctx[0];
    e->flags |= KTS_OOM_HAVE_TASK;
    e->uid = (__u32)ctx[1];
    e->pid = BPF_CORE_READ(task, tgid);
    e->tid = BPF_CORE_READ(task, pid);
    e->oom_score_adj = BPF_CORE_READ(task, signal, oom_score_adj);
    BPF_CORE_READ_STR_INTO(&e->comm, task, comm);
    read_mm(e, task);
    read_memcg(e, task);
  } else {
    e->pid = (__u32)ctx[0];
    e->tid = e->pid;
    e->uid = (__u32)-1;
  }
  bpf_ringbuf_submit(e, 0);
  return 0;
}
