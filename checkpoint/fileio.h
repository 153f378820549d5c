/* checkpoint/fileio.h: the checkpoint module's file seam: every open, write, read, fsync, rename
 * and unlink of shard and manifest bytes goes through one table of function pointers
 * (SQLite's aSyscall[] is the model), so tests can fail the Nth call, return ENOSPC, or tear a
 * write, and crash tests can SIGKILL the process at an exact point.
 *
 * Not here: HDF5's own metadata writes (HDF5 reaches the disk through its sec2 driver, see h5.c;
 * the bulk tensor bytes, which are all that matter for ENOSPC, go through this seam). */
#ifndef FTL_CKPT_FILEIO_H
#define FTL_CKPT_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The syscalls of the seam. Each returns what the POSIX call returns and sets errno. */
typedef struct ck_fs {
  int (*open)(const char *path, int flags, mode_t mode);
  int (*close)(int fd);
  ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t off);
  ssize_t (*pread)(int fd, void *buf, size_t n, off_t off);
  int (*fsync)(int fd);
  int (*rename)(const char *from, const char *to);
  int (*unlink)(const char *path);
  int (*ftruncate)(int fd, off_t size);
} ck_fs;

/* The table in use. Tests may replace single entries; ck_fs_reset() restores the real calls. */
extern ck_fs ck_fs_table;
void ck_fs_reset(void);

/* Fault injection, process-wide and thread-safe (atomic counters).
 * op: which call; nth: the nth call from now fails (1 = the next one), 0 turns it off;
 * err: the errno the call fails with (ENOSPC, EIO, ...). For CK_FAULT_TEAR the nth pwrite writes
 * only the first half of its bytes and then reports full success (what a crash leaves behind on
 * a disk that reordered the write), so only a checksum can notice it. */
typedef enum ck_fault_op {
  CK_FAULT_WRITE = 0,
  CK_FAULT_FSYNC = 1,
  CK_FAULT_RENAME = 2,
  CK_FAULT_TEAR = 3,
  CK_FAULT_OPS_ = 4,
} ck_fault_op;
void ck_fault_set(ck_fault_op op, long nth, int err);
void ck_fault_clear(void);
/* Reads FTL_CKPT_FAULT="write:N:ENOSPC,fsync:N:EIO,rename:N:EIO,tear:N" once; unknown text is
 * ignored with a warning. Called by ftl_ckpt_create. */
void ck_fault_from_env(void);

/* Crash points for crash tests: FTL_CKPT_CRASH_AT names the point, FTL_CKPT_CRASH_RANK (default
 * any) and FTL_CKPT_CRASH_STEP (default any) narrow it. At the point the process SIGKILLs itself:
 * a real crash, no cleanup, no atexit. Points: "mid_shard", "after_shard_rename", "mid_manifest". */
void ck_crash_point(const char *name, int rank, int64_t step);

/* Helpers over the seam that loop on short transfers and EINTR. They return FTL_OK,
 * FTL_ERR_NOSPC (ENOSPC/EDQUOT) or FTL_ERR_IO and leave errno set for the caller's message. */
ftl_err ck_pwrite_all(int fd, const void *buf, size_t n, uint64_t off);
/* Reads exactly n bytes; a short file is FTL_ERR_CORRUPT with errno 0. */
ftl_err ck_pread_all(int fd, void *buf, size_t n, uint64_t off);

/* Durable atomic replace through the seam: path.tmp, write, fsync, rename, fsync(folder).
 * crash_name (or NULL) is the crash point passed halfway through the write. Detail in d. */
ftl_err ck_write_atomic(const char *path, const void *data, size_t size, const char *crash_name, int rank, int64_t step,
                        ftl_diag *d);

/* fsync of a folder through the seam's open/fsync. */
ftl_err ck_fsync_dir(const char *dir, ftl_diag *d);

/* ENOSPC/EDQUOT -> FTL_ERR_NOSPC, anything else -> FTL_ERR_IO. */
ftl_err ck_errno_to_err(int e);

#ifdef __cplusplus
}
#endif
#endif
