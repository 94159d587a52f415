// The pod sandbox's "pause" process for the real-node e2e (built here: there is no registry to
// pull registry.k8s.io/pause from). It holds the pod's namespaces: it sleeps until SIGTERM or
// SIGINT, then exits 0, and reaps any child re-parented to it (it is PID 1 when the pod shares its
// PID namespace).
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction stop = {.sa_handler = on_stop};
  struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
  sigaction(SIGINT, &stop, NULL);
  sigaction(SIGTERM, &stop, NULL);
  sigaction(SIGCHLD, &child, NULL);
  for (;;) pause();
  return 0;
}
