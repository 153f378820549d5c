/* core/files.c: the file helpers of ftl/core.h, above the file seam (core/fs.h): mkdir -p, whole-file
 * reads, and the public doors for durable files (ftl_write_file_atomic, ftl_fsync_dir), which are
 * the seam's one atomic replace and one fsync of a folder. This file calls core/fs.c; core/fs.c
 * never calls this one (the old util.c sat both below and above the seam).
 *
 * Not here: string helpers (core/strings.c). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
#include "ftl/core.h"

ftl_err ftl_mkdir_p(const char *path, ftl_diag *d) {
  char buf[PATH_MAX];
  if (ftl_fmt(buf, sizeof buf, "%s", path)) return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (core_fs_table.mkdir(buf, 0755) != 0 && errno != EEXIST)
      return ftl_diag_fail(d, FTL_ERR_IO, "cannot create folder %s: %s", buf, strerror(errno));
    *p = '/';
  }
  if (core_fs_table.mkdir(buf, 0755) != 0 && errno != EEXIST)
    return ftl_diag_fail(d, FTL_ERR_IO, "cannot create folder %s: %s", buf, strerror(errno));
  struct stat st;
  if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
    return ftl_diag_fail(d, FTL_ERR_IO, "%s exists and is not a folder", buf);
  return FTL_OK;
}

/* Both durable-file helpers of ftl/core.h are thin doors to the file seam (core/fs.c), so fault
 * injection and crash tests reach every durable file, and there is one atomic replace and one
 * fsync of a folder in the tree. */
ftl_err ftl_fsync_dir(const char *dir_path, ftl_diag *d) { return core_fs_fsync_dir(dir_path, d); }

ftl_err ftl_write_file_atomic(const char *path, const void *data, size_t size, ftl_diag *d) {
  /* Several processes may replace one file at once (a metrics file, a status record). */
  return core_fs_replace(path, data, size, CORE_TMP_PER_PROCESS, NULL, -1, -1, d);
}

ftl_err ftl_read_fd(int fd, const char *what, size_t max_bytes, char **data_out, size_t *size_out, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 1 >= cap) {
      size_t ncap = cap ? cap * 2 : 4096;
      char *nbuf = ftl_realloc(buf, ncap);
      if (!nbuf) {
        rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory reading %s", what);
        goto out;
      }
      buf = nbuf;
      cap = ncap;
    }
    ssize_t n = core_fs_table.read(fd, buf + len, cap - len - 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot read %s: %s", what, strerror(errno));
      goto out;
    }
    if (n == 0) break;
    len += (size_t)n;
    if (len > max_bytes) {
      rc = ftl_diag_fail(d, FTL_ERR_RANGE, "%s is larger than %zu bytes", what, max_bytes);
      goto out;
    }
  }
  buf[len] = '\0';
  *data_out = buf;
  *size_out = len;
  buf = NULL;
out:
  ftl_free(buf);
  return rc;
}

ftl_err ftl_read_file(const char *path, size_t max_bytes, char **data_out, size_t *size_out, ftl_diag *d) {
  int fd = core_fs_table.open(path, O_RDONLY, 0);
  if (fd < 0)
    return ftl_diag_fail(d, errno == ENOENT ? FTL_ERR_NOTFOUND : FTL_ERR_IO, "cannot open %s: %s", path,
                         strerror(errno));
  ftl_err rc = ftl_read_fd(fd, path, max_bytes, data_out, size_out, d);
  core_fs_table.close(fd);
  return rc;
}
