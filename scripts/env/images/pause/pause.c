/*
 * The pod sandbox's pid 1 for the pause image kubeadm expects
 * (registry.k8s.io/pause:3.10.2), built here with `gcc -static`.
 *
 * What it must do, as Kubernetes' own pause does:
 *  - hold the pod's namespaces open by staying alive, sleeping in pause(2)
 *    so it costs nothing while nothing happens;
 *  - exit 0 at once on SIGTERM or SIGINT, so a sandbox stops without
 *    waiting for the runtime's kill timeout;
 *  - reap every child that dies: in a pod that shares its pid namespace,
 *    orphans are re-parented to this process, and zombies would pile up;
 *  - print its version for `-v`.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAUSE_VERSION "3.10.2-cridock"

static void on_stop(int signo) {
  /* Only async-signal-safe calls here. */
  static const char message[] = "pause: stopping on signal\n";
  (void)signo;
  (void)!write(STDOUT_FILENO, message, sizeof message - 1);
  _exit(0);
}

static void on_child(int signo) {
  int saved = errno;
  (void)signo;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
  errno = saved;
}

static void handle(int signo, void (*handler)(int)) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  /* SA_NOCLDSTOP: a stopped child is not a dead one. */
  action.sa_flags = signo == SIGCHLD ? SA_NOCLDSTOP | SA_RESTART : SA_RESTART;
  if (sigaction(signo, &action, NULL) != 0) {
    perror("pause: sigaction");
    exit(1);
  }
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "-v") == 0) {
    printf("pause version %s\n", PAUSE_VERSION);
    return 0;
  }
  if (getpid() != 1) {
    fprintf(stderr, "pause: warning: not pid 1, orphans will not be reaped here\n");
  }
  handle(SIGINT, on_stop);
  handle(SIGTERM, on_stop);
  handle(SIGCHLD, on_child);
  for (;;) {
    pause();
  }
}
