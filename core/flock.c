/* core/flock.c: the flock with a deadline and the holder's note (core/flock.h). */
#include "core/flock.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "core/fs.h"
#include "ftl/core.h"

enum { FIRST_POLL_MS = 1, LAST_POLL_MS = 20 };

ftl_err core_flock_until(int fd, int op, int64_t deadline_ms, int note, const char *what, ftl_diag *d) {
  int64_t start = ftl_clock_ms();
  int poll_ms = FIRST_POLL_MS;
  for (;;) {
    if (flock(fd, op | LOCK_NB) == 0) return FTL_OK;
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) return ftl_diag_fail(d, FTL_ERR_IO, "cannot lock %s: %s", what, strerror(errno));
    int left = ftl_deadline_left_ms(deadline_ms);
    if (left == 0) {
      char holder[256] = "";
      if (note) core_flock_note_read(fd, holder, sizeof holder);
      return ftl_diag_fail(d, FTL_ERR_TIMEOUT, "%s stayed locked by another process for %.1f s%s%s%s", what,
                           (double)(ftl_clock_ms() - start) / 1000.0, holder[0] ? " (" : "", holder,
                           holder[0] ? ")" : "");
    }
    int nap = poll_ms < left ? poll_ms : left;
    struct timespec ts = {nap / 1000, (long)(nap % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    if (poll_ms < LAST_POLL_MS) poll_ms = poll_ms * 2 < LAST_POLL_MS ? poll_ms * 2 : LAST_POLL_MS;
  }
}

void core_flock_note_write(int fd, const char *label) {
  char note[320], when[32];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  int n = snprintf(note, sizeof note, "%s: pid %ld on %s since %s\n", label, (long)getpid(), ftl_hostname(), when);
  if (n <= 0 || (size_t)n >= sizeof note) return;
  if (core_fs_table.ftruncate(fd, 0) == 0) (void)core_fs_pwrite_all(fd, note, (size_t)n, 0);
}

void core_flock_note_read(int fd, char *out, size_t size) {
  if (!size) return;
  out[0] = '\0';
  ssize_t got = core_fs_table.pread(fd, out, size - 1, 0);
  out[got > 0 ? got : 0] = '\0';
  out[strcspn(out, "\n")] = '\0';
  /* Whatever another user may have put there is shown, never interpreted: only printable bytes. */
  for (char *p = out; *p; p++)
    if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f) *p = '?';
}
