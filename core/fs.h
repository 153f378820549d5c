/* core/fs.h: ftl's file seam. Every open, write, read, fsync, rename and unlink of bytes that must be
 * durable (checkpoint shards and manifests, the final adapter, snapshots, verdicts, packages,
 * registry records) goes through one table of function pointers (SQLite's aSyscall[] is the
 * model), so tests can fail the Nth call, return ENOSPC, or tear a write, and crash tests can
 * SIGKILL the process at an exact named point.
 *
 * Fault injection from the environment (read once by ftl_fault_from_env):
 *   FTL_FAULT="write:N:ENOSPC,fsync:N:EIO,rename:N:EIO,tear:N"   (FTL_CKPT_FAULT is read too)
 * Crash points (ftl_crash_point): FTL_CRASH_AT=<point> with FTL_CRASH_RANK, FTL_CRASH_STEP,
 * FTL_CRASH_ATTEMPT narrowing it (the FTL_CKPT_CRASH_* names are read too, for old scripts).
 *
 * Not here: HDF5's own metadata writes (checkpoint/h5.c), paths (core/rundir.h).
 * Internal to ftl (not installed). */
#ifndef FTL_CORE_FS_H
#define FTL_CORE_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The syscalls of the seam. Each returns what the POSIX call returns and sets errno. */
typedef struct ftl_fs {
  int (*open)(const char *path, int flags, mode_t mode);
  int (*close)(int fd);
  ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t off);
  ssize_t (*pread)(int fd, void *buf, size_t n, off_t off);
  int (*fsync)(int fd);
  int (*rename)(const char *from, const char *to);
  int (*unlink)(const char *path);
  int (*ftruncate)(int fd, off_t size);
} ftl_fs;

/* The table in use. Tests may replace single entries; ftl_fs_reset() restores the real calls. */
extern ftl_fs ftl_fs_table;
void ftl_fs_reset(void);

/* Fault injection, process-wide and thread-safe. nth: the nth call from now fails (1 = the next
 * one), 0 turns it off; err: the errno. FTL_FAULT_TEAR: the nth pwrite writes half its bytes and
 * reports full success, so only a checksum can notice. */
typedef enum ftl_fault_op {
  FTL_FAULT_WRITE = 0,
  FTL_FAULT_FSYNC = 1,
  FTL_FAULT_RENAME = 2,
  FTL_FAULT_TEAR = 3,
  FTL_FAULT_OPS_ = 4,
} ftl_fault_op;
void ftl_fault_set(ftl_fault_op op, long nth, int err);
void ftl_fault_clear(void);
void ftl_fault_from_env(void);

/* SIGKILLs the process when the environment names this point (and rank/step/attempt match):
 * a real crash, no cleanup. rank -1 and step -1 mean "not a rank" / "no step". */
void ftl_crash_point(const char *name, int rank, int64_t step);

/* Loops on short transfers and EINTR. FTL_OK, FTL_ERR_NOSPC (ENOSPC/EDQUOT) or FTL_ERR_IO, errno
 * left set for the caller's message. */
ftl_err ftl_fs_pwrite_all(int fd, const void *buf, size_t n, uint64_t off);
/* Reads exactly n bytes; a short file is FTL_ERR_CORRUPT with errno 0. */
ftl_err ftl_fs_pread_all(int fd, void *buf, size_t n, uint64_t off);

/* The one durable atomic replace: path.tmp, write, fsync, rename, fsync(folder), all through the
 * seam. crash_name (or NULL) is the crash point passed halfway through the write. A reader sees
 * the old file or the new one, never a part. */
ftl_err ftl_fs_write_atomic(const char *path, const void *data, size_t size, const char *crash_name, int rank,
                            int64_t step, ftl_diag *d);

/* The same replace for files that several processes may replace at once (the temporary file is
 * path.tmp.<pid>, so two writers never share one); no crash point. ftl_write_file_atomic
 * (ftl/core.h) is this call. */
ftl_err ftl_fs_write_atomic_shared(const char *path, const void *data, size_t size, ftl_diag *d);

/* The tail of every replace, for writers that stream into their own temporary file (the shard
 * writer): fsync *fd, close it (*fd becomes -1), rename tmp to path, fsync path's folder, all
 * through the seam. drop_cache: give the file's page-cache pages back after the fsync. *renamed
 * (may be NULL) says whether path is already the new file, which a failed fsync of the folder
 * leaves in place; on failure the caller still owns tmp (and *fd unless it is -1). */
ftl_err ftl_fs_commit_tmp(int *fd, const char *tmp, const char *path, bool drop_cache, bool *renamed,
                          ftl_diag *d);

/* The body of every atomic replace, for a temporary file the caller created (its own naming:
 * ftl_fs_write_atomic's PATH.tmp, the registry's unpredictable PATH.tmp-<random>): writes data
 * into *fd with the crash point (or NULL) halfway, then ftl_fs_commit_tmp. On failure the caller
 * still owns tmp (and *fd unless it is -1). */
ftl_err ftl_fs_fill_and_commit(int *fd, const char *tmp, const char *path, const void *data, size_t size,
                               const char *crash_name, int rank, int64_t step, ftl_diag *d);

/* fsync of a folder through the seam. */
ftl_err ftl_fs_fsync_dir(const char *dir, ftl_diag *d);

/* ENOSPC/EDQUOT -> FTL_ERR_NOSPC, anything else -> FTL_ERR_IO. */
ftl_err ftl_errno_to_err(int e);

#ifdef __cplusplus
}
#endif
#endif
