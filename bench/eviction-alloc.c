// Bench helper for bench/eviction.ts: moves itself into a cgroup (argv[1]), says "ready", and
// on a "go" line touches memory 1 MiB at a time up to argv[2] MiB, reading the cgroup's
// memory.usage_in_bytes after each MiB. The first time usage reaches argv[3] bytes it prints
// "cross <ns>": the CLOCK_MONOTONIC time (process.hrtime's clock) just before touching the MiB
// that crossed. It then holds its memory until stdin closes.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  char path[4096];
  snprintf(path, sizeof(path), "%s/cgroup.procs", argv[1]);
  FILE *f = fopen(path, "w");
  if (!f || fprintf(f, "%d\n", getpid()) < 0 || fclose(f) != 0) {
    perror(path);
    return 2;
  }
  snprintf(path, sizeof(path), "%s/memory.usage_in_bytes", argv[1]);
  int ufd = open(path, O_RDONLY);
  if (ufd < 0) {
    perror(path);
    return 2;
  }
  long max_mib = atol(argv[2]);
  unsigned long long threshold = strtoull(argv[3], NULL, 10);
  setvbuf(stdout, NULL, _IONBF, 0);
  printf("ready %d\n", getpid());
  char line[64];
  if (!fgets(line, sizeof(line), stdin)) return 0;
  int crossed = 0;
  for (long i = 0; i < max_mib; i++) {
    long long before = mono_ns();
    char *p = malloc(1 << 20);
    if (!p) return 3;
    memset(p, 0x5a, 1 << 20);
    char buf[32];
    ssize_t n = pread(ufd, buf, sizeof(buf) - 1, 0);
    if (n > 0 && !crossed) {
      buf[n] = 0;
      if (strtoull(buf, NULL, 10) >= threshold) {
        crossed = 1;
        printf("cross %lld\n", before);
      }
    }
  }
  printf("done\n");
  while (fgets(line, sizeof(line), stdin)) {
  }
  return 0;
}
