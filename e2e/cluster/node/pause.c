/*
 * The pause process of the real node's pod sandboxes (the image containerd expects as
 * registry.k8s.io/pause, which these machines cannot pull). As PID 1 of the pod's
 * namespaces it holds them open, reaps the zombies a shared PID namespace hands it,
 * and exits at once on SIGINT or SIGTERM so a sandbox stops without waiting out a
 * grace period. Built static: the image holds nothing else.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) {
  (void)sig;
  _exit(0);
}

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

static int on(int sig, void (*handler)(int), int flags) {
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_handler = handler;
  action.sa_flags = flags;
  sigemptyset(&action.sa_mask);
  return sigaction(sig, &action, NULL);
}

int main(void) {
  if (getpid() != 1) {
    fprintf(stderr, "pause: not PID 1; it is meant to run as a pod sandbox's first process\n");
  }
  if (on(SIGINT, stop, 0) || on(SIGTERM, stop, 0) || on(SIGCHLD, reap, SA_NOCLDSTOP)) {
    perror("pause: sigaction");
    return 1;
  }
  for (;;) {
    pause();
  }
}
