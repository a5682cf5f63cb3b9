/* The floor of a cgroup snapshot: read a list of files with plain open/read/close and
 * nothing else (no parsing), as fast as C allows.
 * Usage: floor <list-file> <iterations>
 *   list-file: one path per line. Prints one line per iteration: elapsed ns.
 * Build: gcc -O2 -o floor floor.c */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char buf[16384];

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s <list-file> <iterations>\n", argv[0]);
    return 2;
  }
  FILE *f = fopen(argv[1], "r");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  size_t cap = 1024, n = 0;
  char **paths = malloc(cap * sizeof(char *));
  char *line = NULL;
  size_t linecap = 0;
  ssize_t len;
  while ((len = getline(&line, &linecap, f)) > 0) {
    if (line[len - 1] == '\n') line[--len] = '\0';
    if (len == 0) continue;
    if (n == cap) paths = realloc(paths, (cap *= 2) * sizeof(char *));
    paths[n++] = strdup(line);
  }
  fclose(f);
  free(line);

  const int iterations = atoi(argv[2]);
  unsigned long long bytes = 0;
  for (int it = 0; it < iterations; it++) {
    const long long t0 = now_ns();
    for (size_t i = 0; i < n; i++) {
      const int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      ssize_t r;
      /* A short read is the whole file, as in the readers. */
      while ((r = read(fd, buf, sizeof buf)) == (ssize_t)sizeof buf) bytes += (unsigned long long)r;
      if (r > 0) bytes += (unsigned long long)r;
      close(fd);
    }
    printf("%lld\n", now_ns() - t0);
  }
  fprintf(stderr, "%zu files, %llu bytes\n", n, bytes);
  return 0;
}
