/* checkpoint/door.h: the one door from the launcher into checkpoint/ (docs/architecture.md,
 * "Folders run one way"): the L1 root's default and its limits, which the job spec checks and the
 * launcher hands the ranks; the removal of a finished run's L1 folder; the listing of a run's step
 * folders, which `ftl status` reads; and `ftl ckpt`. Everything else in checkpoint/ is the
 * library's own, reached by programs through include/ftl/ckpt.h. The folder_direction test
 * refuses a launcher file that includes another checkpoint/ header.
 *
 * The headers of the files that own these (levels.h, catalog.h) include this one; ckpt_cli.c has no
 * other header. */
#ifndef FTL_CKPT_DOOR_H
#define FTL_CKPT_DOOR_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the L1 level (checkpoint/levels.c) ---- */

/* The root of the L1 folders where no job spec names one: FTL_CKPT_L1_DIR when it is an absolute
 * folder (a site's default in ftl run's environment), else /dev/shm. ftl run gives it to its ranks
 * and cleans up under it; `ftl ckpt` looks there. Header-only: the launcher reads it in builds
 * without the checkpoint library too. */
static inline const char *ck_l1_default_root(void) {
  const char *env = getenv("FTL_CKPT_L1_DIR");
  return env && env[0] == '/' ? env : "/dev/shm";
}

/* The most bytes ftl's names add below an L1 root: "/ftl-" and 16 hex digits, "/step-" and up to
 * 19 digits, "/partner", "/" and a file name of at most 63 bytes (CK_FILE_MAX, checkpoint/manifest.h)
 * with ".tmp" after it; levels.c checks the sum. A longer root would leave L1 off on every rank
 * (its paths cannot be named), so the job spec refuses one (launcher/jobspec.c). */
#define CK_L1_BELOW_ROOT_MAX 128
#define CK_L1_ROOT_MAX (PATH_MAX - 1 - CK_L1_BELOW_ROOT_MAX)

/* A root writable by every user without the sticky bit (mode from stat): any user could rename or
 * remove the run's folder in it, and put their own in its place. /dev/shm and /tmp have the bit
 * (1777). Refused by the job spec when the submitting host has the folder, and by ck_l1_setup on
 * every host. Header-only, for the launcher too. */
static inline int ck_l1_root_unguarded(mode_t mode) { return (mode & S_IWOTH) && !(mode & S_ISVTX); }

/* Removes the L1 folder of run_dir under root, every copy in it, L2's too (the launcher, once the job has
 * succeeded: nothing will restore from it). Only ftl's own names are removed. */
void ck_l1_forget_run(const char *root, const char *run_dir);

/* ---- the run directory's step folders (checkpoint/catalog.c) ---- */

typedef enum ck_step_state {
  CK_STEP_INCOMPLETE = 0, /* no manifest: never committed (a crash, or an abandoned checkpoint) */
  CK_STEP_COMMITTED = 1,
  CK_STEP_BAD = 2,     /* was committed, then failed verification at a restore */
  CK_STEP_REFUSED = 3, /* step-N is a symbolic link or not a folder: never read, written or deleted */
} ck_step_state;

typedef struct ck_step_entry {
  int64_t step;
  ck_step_state state;
} ck_step_entry;

/* Lists the step folders of base, newest first; *out freed with ftl_free. A missing base is an
 * empty list. */
ftl_err ck_list_steps(const char *base, ck_step_entry **out, int *n_out, ftl_diag *d);

/* ---- `ftl ckpt` (checkpoint/ckpt_cli.c) ---- */

/* argv[0] is "ckpt". Runs one subcommand and returns the process exit code: 0 success, 1 a
 * checkpoint failed verification (or none was found to verify), 2 usage or I/O error. Prints
 * results to stdout and diagnostics to stderr. Not thread-safe (uses stdio). */
int ck_ckpt_cli_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
