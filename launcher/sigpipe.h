/* launcher/sigpipe.h: signals turned into bytes on a pipe, so the launcher's and the rank agent's
 * poll() loops see them like any other input (the self-pipe trick). One per process. */
#ifndef FTL_LAUNCHER_SIGPIPE_H
#define FTL_LAUNCHER_SIGPIPE_H

#include <signal.h>
#include <stddef.h>

#include "ftl/error.h"

/* Opens the pipe (non-blocking, close-on-exec) and routes each of sigs[0..n) to it; the previous
 * dispositions go to old[0..n) when old is not NULL. */
ftl_err ln_sigpipe_open(const int *sigs, size_t n, struct sigaction *old, ftl_diag *d);

/* The read end, for poll(); -1 when closed. */
int ln_sigpipe_fd(void);

/* The next signal received, or 0 when none is waiting. */
int ln_sigpipe_next(void);

/* Puts back the dispositions saved by open (when old is not NULL) and closes the pipe. */
void ln_sigpipe_close(const int *sigs, size_t n, const struct sigaction *old);

#endif
