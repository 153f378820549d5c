/* core/owned_dir.c: folders named for the process that made them, and the sweep of those whose
 * maker is gone (core/owned_dir.h). */
#include "core/owned_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
#include "ftl/core.h"

char core_proc_stat(pid_t pid, unsigned long long *start_ticks) {
  char path[64], buf[1024];
  if (start_ticks) *start_ticks = 0;
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return '?';
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return '?';
  buf[n] = '\0';
  const char *paren = strrchr(buf, ')'); /* the command name may itself hold ')' */
  if (!paren || paren[1] != ' ' || !paren[2]) return '?';
  if (start_ticks) {
    /* Field 22 (starttime); the state after the name is field 3. */
    const char *p = paren + 2;
    for (int field = 3; field < 22 && p; field++) {
      p = strchr(p, ' ');
      if (p) p++;
    }
    if (p) *start_ticks = strtoull(p, NULL, 10);
  }
  return paren[2];
}

/* This process's pid namespace (the inode of /proc/self/ns/pid), or 0 when unknown. */
static unsigned long pid_namespace(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long)st.st_ino : 0;
}

/* Whether the process that made a folder is gone: no process has its pid, or the one that has it
 * is a zombie (killed, its parent not yet reaping) or started at another time than the one the
 * folder's name records (the pid was reused: a busy host cycles through 32768 pids in minutes).
 * A folder of an earlier release names no start time: its pid alone decides. */
static int maker_is_gone(pid_t pid, unsigned long long recorded_start) {
  unsigned long long start = 0;
  char state = core_proc_stat(pid, &start);
  if (state == '?') return kill(pid, 0) != 0 && errno == ESRCH; /* no /proc entry we can read */
  if (state == 'Z' || state == 'X') return 1;
  return recorded_start && start && start != recorded_start;
}

void core_owned_dir_sweep(const char *parent, const char *prefix) {
  unsigned long ns = pid_namespace();
  if (!ns) return; /* without our namespace no pid can be judged */
  DIR *dp = opendir(parent);
  if (!dp) return;
  int dfd = dirfd(dp);
  size_t plen = strlen(prefix);
  struct dirent *e;
  while ((e = readdir(dp))) {
    if (strncmp(e->d_name, prefix, plen) != 0 || e->d_name[plen] != 'n') continue;
    char *end = NULL;
    const char *q = e->d_name + plen + 1;
    errno = 0;
    unsigned long their_ns = strtoul(q, &end, 10);
    if (errno || end == q || their_ns != ns || strncmp(end, "-p", 2) != 0) continue;
    q = end + 2;
    long pid = strtol(q, &end, 10);
    if (errno || end == q || pid <= 0 || pid > INT32_MAX || *end != '-') continue;
    unsigned long long start = 0;
    if (strncmp(end, "-s", 2) == 0) {
      q = end + 2;
      start = strtoull(q, &end, 10);
      if (errno || end == q || *end != '-') continue;
    }
    if (!maker_is_gone((pid_t)pid, start)) continue; /* alive, or not ours to judge */
    struct stat st;
    if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
      continue;
    char path[PATH_MAX];
    if (ftl_fmt(path, sizeof path, "%s/%s", parent, e->d_name) == FTL_OK) core_fs_rm_tree(path);
  }
  closedir(dp);
}

ftl_err core_owned_dir_make(const char *parent, const char *prefix, const char *tag, char *out, size_t size,
                            ftl_diag *d) {
  core_owned_dir_sweep(parent, prefix);
  unsigned long long start = 0;
  (void)core_proc_stat(getpid(), &start);
  if (ftl_fmt(out, size, "%s/%sn%lu-p%d-s%llu%s%s-XXXXXX", parent, prefix, pid_namespace(), (int)getpid(), start,
              tag ? "-" : "", tag ? tag : ""))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "the folder name under %s is too long", parent);
  int dirfd = -1;
  ftl_err rc = core_fs_mkdtemp(out, 0700, &dirfd, d);
  if (rc) {
    if (out[0]) core_fs_rm_tree(out);
    out[0] = '\0';
    return rc;
  }
  core_fs_table.close(dirfd);
  return FTL_OK;
}
