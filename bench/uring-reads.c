/* A benchmark only: one cgroup snapshot's reads done three ways, side by side, on the same
 * list of files, to decide whether io_uring beats the kept-open pread loop of the native
 * reader (native/cgroup_reader.cc). No parsing in any mode: this is the I/O alone.
 *   floor   open/read/close of each file (bench/floor.c's loop)
 *   pread   every file kept open, pread at offset 0 one after another (the reader's path)
 *   uring   the same descriptors, IORING_OP_READ at offset 0: one io_uring_enter per chunk of
 *           the submission queue (submit the chunk and wait for all of it)
 *   uring-fixed  the same with registered files and buffers (IORING_OP_READ_FIXED)
 *   uring-async  the same as uring with IOSQE_ASYNC (straight to the io-wq workers)
 * Usage: uring-reads <list-file> <iterations> [sq-entries (default 32)]
 *   Prints per iteration one line per mode: "<mode> <wall ns> <cpu ns>" (cpu: the whole
 *   process, io-wq workers included, as they are its threads), modes interleaved so that
 *   machine noise hits all alike; on stderr the files, bytes per mode and read errors.
 *   A mode that cannot run (io_uring disabled, seccomp) prints "<mode> unavailable <errno>".
 * Raw syscalls with <linux/io_uring.h>: no liburing needed.
 * Build: gcc -O2 -o uring-reads uring-reads.c */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define BUF_SIZE 16384

/* CPU time of the whole process (io-wq workers are its threads), ns. */
static long long cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

struct ring {
  int fd;
  unsigned entries;
  unsigned *sq_head, *sq_tail, *sq_mask, *sq_array;
  unsigned *cq_head, *cq_tail, *cq_mask;
  struct io_uring_sqe *sqes;
  struct io_uring_cqe *cqes;
  void *sq_ptr, *cq_ptr;
  size_t sq_len, cq_len, sqes_len;
};

static int ring_setup(struct ring *r, unsigned entries) {
  struct io_uring_params p;
  memset(&p, 0, sizeof p);
  memset(r, 0, sizeof *r);
  r->fd = (int)syscall(__NR_io_uring_setup, entries, &p);
  if (r->fd < 0) return -errno;
  r->entries = p.sq_entries;
  r->sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
  r->cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
  if (p.features & IORING_FEAT_SINGLE_MMAP) {
    if (r->cq_len > r->sq_len) r->sq_len = r->cq_len;
    r->cq_len = r->sq_len;
  }
  r->sq_ptr = mmap(NULL, r->sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
  if (r->sq_ptr == MAP_FAILED) return -errno;
  r->cq_ptr = (p.features & IORING_FEAT_SINGLE_MMAP)
                  ? r->sq_ptr
                  : mmap(NULL, r->cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
  if (r->cq_ptr == MAP_FAILED) return -errno;
  r->sqes_len = p.sq_entries * sizeof(struct io_uring_sqe);
  r->sqes = mmap(NULL, r->sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
  if (r->sqes == MAP_FAILED) return -errno;
  char *sq = r->sq_ptr, *cq = r->cq_ptr;
  r->sq_head = (unsigned *)(sq + p.sq_off.head);
  r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
  r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
  r->sq_array = (unsigned *)(sq + p.sq_off.array);
  r->cq_head = (unsigned *)(cq + p.cq_off.head);
  r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
  r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
  r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
  return 0;
}

enum uring_mode { PLAIN, FIXED, ASYNC };

static size_t n_files;
static char **paths;
static int *fds;
static char *bufs; /* one BUF_SIZE buffer per SQ entry: the reads of a chunk are in flight together */
static unsigned n_bufs;
static const char *const mode_names[5] = {"floor", "pread", "uring", "uring-fixed", "uring-async"};
static unsigned long long bytes_of[5];
static unsigned long long errors_of[5];

/* Reads every kept file once through the ring; returns 0 or -errno of io_uring_enter. */
static int uring_pass(struct ring *r, enum uring_mode mode, int slot) {
  size_t next = 0;
  while (next < n_files) {
    unsigned tail = *r->sq_tail;
    unsigned chunk = 0;
    while (chunk < r->entries && next < n_files) {
      const unsigned idx = tail & *r->sq_mask;
      struct io_uring_sqe *sqe = &r->sqes[idx];
      memset(sqe, 0, sizeof *sqe);
      sqe->opcode = mode == FIXED ? IORING_OP_READ_FIXED : IORING_OP_READ;
      sqe->fd = mode == FIXED ? (int)next : fds[next];
      if (mode == FIXED) sqe->flags = IOSQE_FIXED_FILE;
      if (mode == ASYNC) sqe->flags = IOSQE_ASYNC;
      sqe->addr = (unsigned long)(bufs + (size_t)chunk * BUF_SIZE);
      sqe->len = BUF_SIZE;
      sqe->off = 0;
      sqe->buf_index = 0; /* FIXED: one registered region covers every buffer */
      sqe->user_data = next;
      r->sq_array[idx] = idx;
      tail++;
      chunk++;
      next++;
    }
    atomic_store_explicit((_Atomic unsigned *)r->sq_tail, tail, memory_order_release);
    unsigned done = 0;
    int ret;
    do ret = (int)syscall(__NR_io_uring_enter, r->fd, chunk, chunk, IORING_ENTER_GETEVENTS, NULL, 0);
    while (ret < 0 && errno == EINTR);
    if (ret < 0) return -errno;
    while (done < chunk) {
      unsigned head = *r->cq_head;
      const unsigned ctail = atomic_load_explicit((_Atomic unsigned *)r->cq_tail, memory_order_acquire);
      if (head == ctail) {
        do ret = (int)syscall(__NR_io_uring_enter, r->fd, 0, chunk - done, IORING_ENTER_GETEVENTS, NULL, 0);
        while (ret < 0 && errno == EINTR);
        if (ret < 0) return -errno;
        continue;
      }
      for (; head != ctail; head++, done++) {
        const struct io_uring_cqe *cqe = &r->cqes[head & *r->cq_mask];
        if (cqe->res < 0) errors_of[slot]++;
        else bytes_of[slot] += (unsigned long long)cqe->res;
      }
      atomic_store_explicit((_Atomic unsigned *)r->cq_head, head, memory_order_release);
    }
  }
  return 0;
}

static void floor_pass(void) {
  static char buf[BUF_SIZE];
  for (size_t i = 0; i < n_files; i++) {
    const int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      errors_of[0]++;
      continue;
    }
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) == (ssize_t)sizeof buf) bytes_of[0] += (unsigned long long)r;
    if (r > 0) bytes_of[0] += (unsigned long long)r;
    close(fd);
  }
}

static void pread_pass(void) {
  static char buf[BUF_SIZE];
  for (size_t i = 0; i < n_files; i++) {
    const ssize_t r = pread(fds[i], buf, sizeof buf, 0);
    if (r < 0) errors_of[1]++;
    else bytes_of[1] += (unsigned long long)r;
  }
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: %s <list-file> <iterations> [sq-entries]\n", argv[0]);
    return 2;
  }
  FILE *f = fopen(argv[1], "r");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  size_t cap = 1024;
  paths = malloc(cap * sizeof(char *));
  char *line = NULL;
  size_t linecap = 0;
  ssize_t len;
  while ((len = getline(&line, &linecap, f)) > 0) {
    if (line[len - 1] == '\n') line[--len] = '\0';
    if (len == 0) continue;
    if (n_files == cap) paths = realloc(paths, (cap *= 2) * sizeof(char *));
    paths[n_files++] = strdup(line);
  }
  fclose(f);
  free(line);
  const int iterations = atoi(argv[2]);
  const unsigned sq_entries = argc == 4 ? (unsigned)atoi(argv[3]) : 32;

  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < n_files + 64) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  fds = malloc(n_files * sizeof(int));
  for (size_t i = 0; i < n_files; i++) {
    fds[i] = open(paths[i], O_RDONLY | O_CLOEXEC);
    if (fds[i] < 0) {
      fprintf(stderr, "%s: %s\n", paths[i], strerror(errno));
      return 1;
    }
  }
  struct ring plain_ring, fixed_ring;
  int plain_err = ring_setup(&plain_ring, sq_entries);
  int fixed_err = ring_setup(&fixed_ring, sq_entries);
  n_bufs = plain_err ? (fixed_err ? 1 : fixed_ring.entries) : plain_ring.entries;
  if (!fixed_err && fixed_ring.entries > n_bufs) n_bufs = fixed_ring.entries;
  bufs = aligned_alloc(4096, (size_t)n_bufs * BUF_SIZE);
  memset(bufs, 0, (size_t)n_bufs * BUF_SIZE);
  if (!fixed_err) {
    struct iovec iov = {bufs, (size_t)n_bufs * BUF_SIZE};
    if (syscall(__NR_io_uring_register, fixed_ring.fd, IORING_REGISTER_BUFFERS, &iov, 1) < 0 ||
        syscall(__NR_io_uring_register, fixed_ring.fd, IORING_REGISTER_FILES, fds, (unsigned)n_files) < 0) {
      fixed_err = -errno;
    }
  }

  for (int it = 0; it < iterations; it++) {
    for (int m = 0; m < 5; m++) {
      const int ring_err = m == 3 ? fixed_err : plain_err;
      if (m >= 2 && ring_err) {
        printf("%s unavailable %d\n", mode_names[m], -ring_err);
        continue;
      }
      const long long t0 = now_ns(), c0 = cpu_ns();
      int e = 0;
      if (m == 0) floor_pass();
      else if (m == 1) pread_pass();
      else if (m == 2) e = uring_pass(&plain_ring, PLAIN, m);
      else if (m == 3) e = uring_pass(&fixed_ring, FIXED, m);
      else e = uring_pass(&plain_ring, ASYNC, m);
      const long long wall = now_ns() - t0, cpu = cpu_ns() - c0;
      if (e) printf("%s unavailable %d\n", mode_names[m], -e);
      else printf("%s %lld %lld\n", mode_names[m], wall, cpu);
    }
    fflush(stdout);
  }
  fprintf(stderr, "%zu files, sq %u; bytes floor %llu pread %llu uring %llu uring-fixed %llu uring-async %llu; errors %llu %llu %llu %llu %llu\n",
          n_files, plain_err ? 0 : plain_ring.entries, bytes_of[0], bytes_of[1], bytes_of[2], bytes_of[3], bytes_of[4],
          errors_of[0], errors_of[1], errors_of[2], errors_of[3], errors_of[4]);
  return 0;
}
