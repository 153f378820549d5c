/* pipeline/pl_util.c: helpers shared inside pipeline/ (pl_util.h). */
#include "pipeline/pl_util.h"

#include <dirent.h>
#include <pwd.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/flock.h"
#include "core/jsonl.h"
#include "ftl/core.h"
#include "pipeline/sha256.h"

char *pl_json_text(const json_t *j, int newline, size_t *len_out) {
  char *text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
  if (!text) return NULL;
  size_t len = strlen(text);
  char *out = ftl_malloc(len + 2);
  if (out) {
    memcpy(out, text, len);
    if (newline) out[len++] = '\n';
    out[len] = '\0';
    if (len_out) *len_out = len;
  }
  free(text);
  return out;
}

void pl_crash_point(const char *name) {
  if (name && name[0]) core_crash_point(name, -1, -1);
}

ftl_err pl_lock(const char *path, int64_t timeout_ms, int *fd_out, ftl_diag *d) {
  *fd_out = -1;
  int fd = -1;
  uint64_t size = 0;
  /* Opened as every file from outside is (core's one reader): a link, FIFO or folder planted at
   * the lock's name is refused, never followed or waited on. Its contents are not read. */
  ftl_err rc = core_fs_open_regular_as(path, O_RDWR | O_CREAT, 0644, UINT64_MAX, &fd, &size, d);
  if (rc) return ftl_diag_prefix(d, rc, "the lock");
  rc = core_flock_until(fd, LOCK_EX, ftl_deadline_after_ms(timeout_ms < 0 ? 0 : timeout_ms), 0, path, d);
  if (rc) {
    core_fs_table.close(fd);
    return rc;
  }
  *fd_out = fd;
  return FTL_OK;
}

void pl_unlock(int fd) {
  if (fd >= 0) core_fs_table.close(fd); /* closing the descriptor releases the flock */
}

ftl_err pl_jsonl_append(const char *path, const json_t *rec, int64_t lock_timeout_ms, ftl_diag *d) {
  core_jsonl_opts o = {.lock = true, .lock_timeout_ms = lock_timeout_ms, .fsync = true};
  return core_jsonl_append(path, rec, &o, d);
}


int pl_safe_name(const char *name, int allow_dot) {
  size_t n = 0;
  if (!name || !name[0]) return 0;
  if (!strcmp(name, ".") || !strcmp(name, "..")) return 0;
  if (name[0] == '.' && !allow_dot) return 0;
  if (strstr(name, "..")) return 0;
  for (; name[n]; n++) {
    char c = name[n];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-'))
      return 0;
  }
  return n <= 255;
}

void pl_effective_user(char *buf, size_t size) {
  uid_t uid = geteuid();
  struct passwd pw, *found = NULL;
  char pwbuf[4096];
  if (getpwuid_r(uid, &pw, pwbuf, sizeof pwbuf, &found) == 0 && found && found->pw_name && found->pw_name[0])
    snprintf(buf, size, "%s@%s", found->pw_name, ftl_hostname());
  else
    snprintf(buf, size, "%lu@%s", (unsigned long)uid, ftl_hostname());
}
