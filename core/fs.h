/* core/fs.h: ftl's file seam. Every open, write, read, fsync, rename and unlink of bytes that must be
 * durable (checkpoint shards and manifests, the final adapter, snapshots, verdicts, packages,
 * registry records, JSON-lines ledgers and logs) goes through one table of function pointers
 * (SQLite's aSyscall[] is the model), so tests can fail the Nth call, return ENOSPC, or tear a
 * write, and crash tests can SIGKILL the process at an exact named point. Above the table: the one
 * atomic replace of ftl (core_fs_replace), the one fsync of a folder (core_fs_fsync_dir), exclusive
 * new files and temporary folders.
 *
 * Fault injection from the environment (read by core_fault_from_env, which the checkpoint handle
 * and the registry commands call when they start):
 *   FTL_FAULT="write:N:ENOSPC,fsync:N:EIO,rename:N:EIO,tear:N"   (FTL_CKPT_FAULT is read too)
 * write and tear count pwrite and write calls together, rename counts rename and
 * rename_noreplace.
 * Crash points (core_crash_point): FTL_CRASH_AT=<point> with FTL_CRASH_RANK, FTL_CRASH_STEP,
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

/* The syscalls of the seam. Each returns what the POSIX call returns and sets errno. The first
 * eight are the checkpoint writer's; the rest (issue 19) are what the other durable writers need:
 * exclusive creates inside a folder (openat), appends of JSON-lines records (write to an O_APPEND
 * descriptor), temporary folders (mkdtemp, fchmod), folder trees (mkdir, unlinkat) and a rename
 * that never replaces. open and openat always add O_CLOEXEC. */
typedef struct core_fs {
  int (*open)(const char *path, int flags, mode_t mode);
  int (*close)(int fd);
  ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t off);
  ssize_t (*pread)(int fd, void *buf, size_t n, off_t off);
  int (*fsync)(int fd);
  int (*rename)(const char *from, const char *to);
  int (*unlink)(const char *path);
  int (*ftruncate)(int fd, off_t size);
  int (*openat)(int dirfd, const char *name, int flags, mode_t mode);
  /* Faults: counted with pwrite (FTL_FAULT_WRITE, FTL_FAULT_TEAR), so a torn append is half a line
   * that reports full success. */
  ssize_t (*write)(int fd, const void *buf, size_t n);
  ssize_t (*read)(int fd, void *buf, size_t n);
  int (*mkdir)(const char *path, mode_t mode);
  char *(*mkdtemp)(char *tmpl);
  int (*fchmod)(int fd, mode_t mode);
  int (*unlinkat)(int dirfd, const char *name, int flags);
  /* rename that fails with EEXIST when `to` exists (renameat2's RENAME_NOREPLACE; where the file
   * system lacks it, a check then rename, which is not atomic against a racing creator). Faults:
   * counted with rename (FTL_FAULT_RENAME). */
  int (*rename_noreplace)(const char *from, const char *to);
  /* A symbolic link at path to target (the Hugging Face cache's entries for a fetched base,
   * pipeline/hf_cache.c). */
  int (*symlink)(const char *target, const char *path);
  /* Space reserved for a file beyond its end (FALLOC_FL_KEEP_SIZE: a checkpoint shard's blocks
   * taken before HDF5 writes them, checkpoint/h5.c). */
  int (*fallocate)(int fd, int mode, off_t offset, off_t len);
} core_fs;

/* The table in use. Tests may replace single entries; core_fs_reset() restores the real calls. */
extern core_fs core_fs_table;
void core_fs_reset(void);

/* Fault injection, process-wide and thread-safe. nth: the nth call from now fails (1 = the next
 * one), 0 turns it off; err: the errno. FTL_FAULT_TEAR: the nth pwrite writes half its bytes and
 * reports full success, so only a checksum can notice. */
typedef enum core_fault_op {
  FTL_FAULT_WRITE = 0,
  FTL_FAULT_FSYNC = 1,
  FTL_FAULT_RENAME = 2,
  FTL_FAULT_TEAR = 3,
  FTL_FAULT_OPS_ = 4,
} core_fault_op;
void core_fault_set(core_fault_op op, long nth, int err);
void core_fault_clear(void);
void core_fault_from_env(void);

/* SIGKILLs the process when the environment names this point (and rank/step/attempt match):
 * a real crash, no cleanup. rank -1 and step -1 mean "not a rank" / "no step". */
void core_crash_point(const char *name, int rank, int64_t step);

/* Loops on short transfers and EINTR. FTL_OK, FTL_ERR_NOSPC (ENOSPC/EDQUOT) or FTL_ERR_IO, errno
 * left set for the caller's message. */
ftl_err core_fs_pwrite_all(int fd, const void *buf, size_t n, uint64_t off);
/* Reads exactly n bytes; a short file is FTL_ERR_CORRUPT with errno 0. */
ftl_err core_fs_pread_all(int fd, void *buf, size_t n, uint64_t off);

/* How the temporary file of a replace is named (it is always created O_EXCL|O_NOFOLLOW in the
 * folder of the file it replaces, so a planted link is neither written through nor renamed into
 * place):
 *   CORE_TMP_FIXED         PATH.tmp; a stale one (a writer that died) is removed first. For files
 *                          one process replaces (checkpoints, run-directory records).
 *   CORE_TMP_PER_PROCESS   PATH.tmp.<pid>, stale one removed first: several processes may replace
 *                          the same file at once and never share a temporary file; the last
 *                          rename wins whole. ftl_write_file_atomic (ftl/core.h).
 *   CORE_TMP_UNPREDICTABLE PATH.tmp-<12 random hex digits>, retried on a collision: for folders
 *                          others can write (the registry, docs/security.md), where nobody may
 *                          predict the name and plant something there first. Stale ones are the
 *                          caller's to reap (the registry does, under its lock). */
typedef enum core_tmp_naming {
  CORE_TMP_FIXED = 0,
  CORE_TMP_PER_PROCESS = 1,
  CORE_TMP_UNPREDICTABLE = 2,
} core_tmp_naming;

/* Creates the temporary file for replacing path, named as `naming` says: its name into tmp, the
 * write descriptor into *fd. */
ftl_err core_fs_create_tmp(const char *path, core_tmp_naming naming, char *tmp, size_t tmp_size, int *fd, ftl_diag *d);

/* The one durable atomic replace of ftl: a temporary file (core_fs_create_tmp), write, fsync,
 * rename, fsync(folder), all through the seam. crash_name (or NULL) is the crash point passed
 * halfway through the write. A reader sees the old file or the new one, never a part; on failure
 * the temporary file is removed. Every other atomic write (core_fs_write_atomic,
 * ftl_write_file_atomic) is this call. */
ftl_err core_fs_replace(const char *path, const void *data, size_t size, core_tmp_naming naming, const char *crash_name,
                        int rank, int64_t step, ftl_diag *d);

/* core_fs_replace with CORE_TMP_FIXED (the checkpoint writer's and the gate's spelling). */
ftl_err core_fs_write_atomic(const char *path, const void *data, size_t size, const char *crash_name, int rank,
                            int64_t step, ftl_diag *d);

/* The tail of every replace, for writers that stream into their own temporary file (the shard
 * writer, the package canonicalizer): fsync *fd, close it (*fd becomes -1), rename tmp to path,
 * fsync path's folder, all through the seam. drop_cache: give the file's page-cache pages back
 * after the fsync. *renamed (may be NULL) says whether path is already the new file, which a
 * failed fsync of the folder leaves in place; on failure the caller still owns tmp (and *fd unless
 * it is -1). */
ftl_err core_fs_commit_tmp(int *fd, const char *tmp, const char *path, bool drop_cache, bool *renamed, ftl_diag *d);

/* A new file name in the folder dirfd (AT_FDCWD: name is a path), created O_EXCL|O_NOFOLLOW with
 * mode (an existing file or a planted link is refused), written whole and fsynced, through the
 * seam; removed again on failure. Not atomic by itself: for files inside a temporary folder that
 * is renamed into place afterwards, or files nobody reads before they are complete. Messages name
 * shown_dir/name (shown_dir NULL: name alone). The folder is not fsynced. */
ftl_err core_fs_write_new_at(int dirfd, const char *shown_dir, const char *name, const void *data, size_t size,
                             mode_t mode, ftl_diag *d);

/* mkdtemp(tmpl) through the seam, then the folder opened (O_DIRECTORY|O_NOFOLLOW) and chmod'ed to
 * mode (mkdtemp makes 0700; a folder that is served must be readable). The descriptor into
 * *dirfd. When mkdtemp itself fails, tmpl[0] is set to '\0' (nothing to remove); after that tmpl
 * names the folder even on failure, and removing it is the caller's. */
ftl_err core_fs_mkdtemp(char *tmpl, mode_t mode, int *dirfd, ftl_diag *d);

/* Removes a folder of ftl's own making (a temporary folder, a rank's shared-memory folder, the
 * base of mpirun's session folder): its plain files and folders, at most 6 deep, then itself,
 * through the seam and never following a link. Best effort, as cleanup is: what cannot be removed
 * stays. */
void core_fs_rm_tree(const char *dir);

/* The one reader of a file from outside (run directories, registries, ledgers, anything a user or
 * another user can plant): opened O_NOFOLLOW|O_NONBLOCK (a link, FIFO or device never blocks or
 * redirects the read), fstat must say a regular file of at most max_bytes, and no more than that
 * recorded size is read. NUL-terminated, freed with ftl_free. FTL_ERR_NOTFOUND when missing,
 * FTL_ERR_CORRUPT (naming path) when a link, not a regular file, too large or shorter than its size.
 * Every refusal is one error, FTL_ERR_CORRUPT, its message naming the path and what it is; the
 * descriptors of the two below are blocking again once checked. */
ftl_err core_fs_read_regular(const char *path, size_t max_bytes, char **data_out, size_t *size_out, ftl_diag *d);
/* The same open and checks; the descriptor and the recorded size. */
ftl_err core_fs_open_regular(const char *path, uint64_t max_bytes, int *fd_out, uint64_t *size_out, ftl_diag *d);
/* The same with the caller's access flags and creation mode (O_RDWR|O_CREAT and 0644: a file from
 * outside that ftl also writes in place, such as the attempt fence); O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC
 * are added. A FIFO or socket that cannot be opened for writing is refused as not a regular file. */
ftl_err core_fs_open_regular_as(const char *path, int flags, mode_t mode, uint64_t max_bytes, int *fd_out,
                                uint64_t *size_out, ftl_diag *d);

/* n random bytes as 2n lowercase hex digits (getrandom), out holding at least 2n+1 bytes; n <= 64. */
ftl_err core_random_hex(char *out, size_t n, ftl_diag *d);
/* n bytes as 2n lowercase hex digits and a NUL, into out (2n+1 bytes): ftl's one hex encoder (digests,
 * MACs, signatures, random names). */
void core_hex(const void *bytes, size_t n, char *out);

/* fsync of a folder through the seam: the one of ftl (ftl_fsync_dir, ftl/core.h, is this call). */
ftl_err core_fs_fsync_dir(const char *dir, ftl_diag *d);

/* ENOSPC/EDQUOT -> FTL_ERR_NOSPC, anything else -> FTL_ERR_IO. */
ftl_err core_errno_to_err(int e);

#ifdef __cplusplus
}
#endif
#endif
