/* The pod sandbox's infra process: holds the pod's namespaces open, does nothing else.
 * As PID 1 of a shared PID namespace it must reap orphaned children, and it exits
 * cleanly on SIGTERM/SIGINT so that StopPodSandbox does not wait for a SIGKILL.
 * Built static (gcc -static -O2) so the image needs no libc. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_terminate(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("pause (kubelet-ts) 3.9");
    return 0;
  }
  if (getpid() != 1) {
    /* Like upstream pause: warn, but keep going (useful when run by hand). */
    fputs("Warning: pause should be the first process\n", stderr);
  }

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = on_terminate;
  if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0) return 1;
  sa.sa_handler = on_child;
  sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
  if (sigaction(SIGCHLD, &sa, NULL) < 0) return 2;

  for (;;) pause();
}
