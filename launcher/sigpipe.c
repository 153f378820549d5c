/* launcher/sigpipe.c: the self-pipe for signals (see sigpipe.h). */
#include "launcher/sigpipe.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static int pipe_fds[2] = {-1, -1};

static void on_signal(int sig) {
  int saved = errno;
  unsigned char b = (unsigned char)sig;
  ssize_t ignored = write(pipe_fds[1], &b, 1);
  (void)ignored;
  errno = saved;
}

ftl_err ln_sigpipe_open(const int *sigs, size_t n, struct sigaction *old, ftl_diag *d) {
  if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) return ftl_diag_fail(d, FTL_ERR_IO, "pipe: %s", strerror(errno));
  struct sigaction sa = {.sa_handler = on_signal};
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < n; i++) sigaction(sigs[i], &sa, old ? &old[i] : NULL);
  return FTL_OK;
}

int ln_sigpipe_fd(void) { return pipe_fds[0]; }

int ln_sigpipe_next(void) {
  unsigned char b;
  return pipe_fds[0] >= 0 && read(pipe_fds[0], &b, 1) == 1 ? b : 0;
}

void ln_sigpipe_close(const int *sigs, size_t n, const struct sigaction *old) {
  for (size_t i = 0; old && i < n; i++) sigaction(sigs[i], &old[i], NULL);
  for (int i = 0; i < 2; i++) {
    if (pipe_fds[i] >= 0) close(pipe_fds[i]);
    pipe_fds[i] = -1;
  }
}
