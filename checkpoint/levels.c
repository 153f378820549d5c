/* checkpoint/levels.c: the L1 level's folder, its size limit and its eviction, and the same for the
 * L2 copies (other hosts' shards) kept in a partner/ folder inside each step's L1 folder
 * (checkpoint/levels.h). */
#include "checkpoint/levels.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include "checkpoint/catalog.h"
#include "checkpoint/manifest.h"
#include "core/fs.h"
#include "ftl/core.h"

/* Every name ftl puts below an L1 root fits the room the job spec leaves it (levels.h): "/ftl-" and
 * 16 hex digits, "/step-" and 19 digits, "/partner", "/" and the longest file name with ".tmp". */
_Static_assert(CK_L1_BELOW_ROOT_MAX >= 5 + 16 + 6 + 19 + 1 + sizeof CK_L2_SUB - 1 + 1 + CK_FILE_MAX - 1 + 4,
               "raise CK_L1_BELOW_ROOT_MAX");

/* NULL when path is this user's own folder, private and not a link (an older ftl made them 0755:
 * one writable by nobody else is made private); else why not. */
static const char *not_private(const char *path) {
  struct stat own;
  if (lstat(path, &own) != 0) return strerror(errno);
  if (!S_ISDIR(own.st_mode)) return "not a folder (a link?)";
  if (own.st_uid != geteuid()) return "owned by another user";
  if ((own.st_mode & 022) != 0) return "writable by other users";
  if ((own.st_mode & 077) != 0) {
    /* Through the folder itself (O_NOFOLLOW): the folder checked above, not what a link put in its
     * place since. */
    int fd = core_fs_table.open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0) return strerror(errno);
    int rc = core_fs_table.fchmod(fd, 0700);
    int e = errno;
    core_fs_table.close(fd);
    if (rc != 0) return strerror(e);
  }
  return NULL;
}

/* ROOT/ftl-<XXH3 of the run directory's real path>: two spellings of one run share their copies. */
static int run_folder(const char *root, const char *run_dir, char *out, size_t size) {
  char real[PATH_MAX];
  const char *key = realpath(run_dir, real) ? real : run_dir;
  uint64_t h = (uint64_t)XXH3_64bits(key, strlen(key));
  return ftl_fmt(out, size, "%s/ftl-%016" PRIx64, root, h) == FTL_OK;
}

void ck_l1_setup(ck_l1 *l1, const char *run_dir, const char *want, uint64_t max_bytes) {
  memset(l1, 0, sizeof *l1);
  const char *root = want;
  if (!root || !*root || !run_dir || !*run_dir) return;
  struct stat st;
  if (root[0] != '/' || stat(root, &st) != 0 || !S_ISDIR(st.st_mode)) {
    FTL_LOG(FTL_LOG_WARN, "ckpt", "L1 folder '%s' is not an absolute path to a folder: checkpoints go to the run "
            "directory only", root);
    return;
  }
  if (strlen(root) > CK_L1_ROOT_MAX) {
    FTL_LOG(FTL_LOG_WARN, "ckpt", "L1 off: the L1 folder '%.64s...' is %zu bytes long, more than the %d its paths "
            "leave room for: checkpoints go to the run directory only", root, strlen(root), CK_L1_ROOT_MAX);
    return;
  }
  /* Our folder's own checks (below) cannot help here: in such a root another user may rename or
   * remove it between two of our steps, and put theirs in its place. */
  if (ck_l1_root_unguarded(st.st_mode)) {
    FTL_LOG(FTL_LOG_WARN, "ckpt", "L1 off: the L1 folder %s is writable by every user and has no sticky bit (any of "
            "them could rename or delete this run's folder in it; chmod +t, as /dev/shm has): checkpoints go to "
            "the run directory only", root);
    return;
  }
  if (!run_folder(root, run_dir, l1->dir, sizeof l1->dir)) {
    l1->dir[0] = '\0';
    return;
  }
  l1->max_bytes = max_bytes;
  /* The root is shared (a world-writable /dev/shm) and the folder's name is predictable: it must be
   * this user's own folder, private, and not a link, or another user could hand a restore their
   * files (the checksums are not cryptographic). */
  const char *why = NULL;
  if (core_fs_table.mkdir(l1->dir, 0700) != 0 && errno != EEXIST) why = strerror(errno);
  else why = not_private(l1->dir);
  if (why) {
    FTL_LOG(FTL_LOG_WARN, "ckpt", "L1 off: %s is not a private folder of this user: %s", l1->dir, why);
    l1->dir[0] = '\0';
  }
}

ftl_err ck_l1_step_dir(const ck_l1 *l1, int64_t step, char *out, size_t size) {
  if (!l1->dir[0]) return FTL_ERR_STATE;
  return ck_step_dir(l1->dir, step, out, size);
}

/* The steps that have a copy of shard `rank` in sub ("": this rank's own L1 copies; CK_L2_SUB: the
 * L2 copies this host keeps for a partner), and its size, through fn. */
typedef void (*each_copy_fn)(const ck_l1 *l1, const char *sub, int64_t step, const char *path, uint64_t size, void *user);

static void each_copy(const ck_l1 *l1, const char *sub, int rank, each_copy_fn fn, void *user) {
  DIR *dir = opendir(l1->dir);
  if (!dir) return;
  char file[CK_FILE_MAX];
  ck_shard_file_name(rank, file);
  struct dirent *e;
  while ((e = readdir(dir)) != NULL) {
    int64_t step;
    if (!ck_parse_step_name(e->d_name, &step)) continue;
    char path[PATH_MAX];
    struct stat st;
    if (ftl_fmt(path, sizeof path, "%s/%s/%s%s%s", l1->dir, e->d_name, sub, *sub ? "/" : "", file) ||
        lstat(path, &st) != 0)
      continue;
    fn(l1, sub, step, path, S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0, user);
  }
  closedir(dir);
}

/* Removes one copy, and its folders once no copy is left in them. */
static void remove_copy(const ck_l1 *l1, const char *sub, int64_t step, const char *path) {
  core_fs_table.unlink(path);
  char sd[PATH_MAX], pd[PATH_MAX];
  if (ck_l1_step_dir(l1, step, sd, sizeof sd) != FTL_OK) return;
  if (*sub && ftl_fmt(pd, sizeof pd, "%s/%s", sd, sub) == FTL_OK) core_fs_table.unlinkat(AT_FDCWD, pd, AT_REMOVEDIR);
  core_fs_table.unlinkat(AT_FDCWD, sd, AT_REMOVEDIR); /* fails while other ranks' copies are there */
}

typedef struct room {
  int64_t step;
  int64_t oldest;
  const char *oldest_path;
  char oldest_buf[PATH_MAX];
  uint64_t held; /* bytes of this rank's copies of other steps */
} room;

static void find_oldest(const ck_l1 *l1, const char *sub, int64_t step, const char *path, uint64_t size, void *user) {
  (void)l1;
  (void)sub;
  room *r = user;
  if (step == r->step) return;
  r->held += size;
  if (r->oldest < 0 || step < r->oldest) {
    r->oldest = step;
    snprintf(r->oldest_buf, sizeof r->oldest_buf, "%s", path);
    r->oldest_path = r->oldest_buf;
  }
}

static int make_room(const ck_l1 *l1, const char *sub, int rank, int64_t step, uint64_t bytes, char *why,
                     size_t why_size) {
  char sd[PATH_MAX];
  ftl_diag d = {{0}};
  if (ck_l1_step_dir(l1, step, sd, sizeof sd) != FTL_OK) {
    snprintf(why, why_size, "L1 is off");
    return 0;
  }
  if (l1->max_bytes && bytes > l1->max_bytes) {
    snprintf(why, why_size, "the shard (%" PRIu64 " bytes) is larger than the L1 limit (%" PRIu64 " bytes)", bytes,
             l1->max_bytes);
    return 0;
  }
  /* The newest committed step's copy stays while this one is written: it is the one a failure
   * now would restore. Older ones go first; the newest only if the space is needed. */
  for (int guard = 0; guard < 100000; guard++) {
    room r = {.step = step, .oldest = -1};
    each_copy(l1, sub, rank, find_oldest, &r);
    struct statvfs vfs;
    uint64_t free_bytes = statvfs(l1->dir, &vfs) == 0 ? (uint64_t)vfs.f_bavail * vfs.f_frsize : UINT64_MAX;
    int over_limit = l1->max_bytes && r.held + bytes > l1->max_bytes;
    int no_space = bytes + (bytes >> 4) > free_bytes;
    if (!over_limit && !no_space) break;
    if (!r.oldest_path) {
      snprintf(why, why_size, "%s has %" PRIu64 " bytes free, the shard needs %" PRIu64, l1->dir, free_bytes, bytes);
      return 0;
    }
    remove_copy(l1, sub, r.oldest, r.oldest_path);
  }
  if (*sub && ftl_fmt(sd + strlen(sd), sizeof sd - strlen(sd), "/%s", sub)) {
    snprintf(why, why_size, "path too long");
    return 0;
  }
  if (ftl_mkdir_p(sd, &d) != FTL_OK) {
    snprintf(why, why_size, "%s", d.msg);
    return 0;
  }
  return 1;
}

int ck_l1_make_room(const ck_l1 *l1, int rank, int64_t step, uint64_t bytes, char *why, size_t why_size) {
  return make_room(l1, "", rank, step, bytes, why, why_size);
}

int ck_l2_make_room(const ck_l1 *l1, int shard, int64_t step, uint64_t bytes, char *why, size_t why_size) {
  return make_room(l1, CK_L2_SUB, shard, step, bytes, why, why_size);
}

ftl_err ck_l2_step_dir(const ck_l1 *l1, int64_t step, char *out, size_t size) {
  ftl_err rc = ck_l1_step_dir(l1, step, out, size);
  if (rc) return rc;
  size_t n = strlen(out);
  return ftl_fmt(out + n, size - n, "/%s", CK_L2_SUB);
}

/* The steps a keep rule keeps (the second is -1 when there is none). */
static void drop_other(const ck_l1 *l1, const char *sub, int64_t step, const char *path, uint64_t size, void *user) {
  (void)size;
  const int64_t *keep = user;
  if (step != keep[0] && step != keep[1]) remove_copy(l1, sub, step, path);
}

void ck_l1_keep_two(const ck_l1 *l1, int rank, int64_t step, int64_t also) {
  int64_t keep[2] = {step, also};
  if (!l1->dir[0]) return;
  each_copy(l1, "", rank, drop_other, keep);
}

void ck_l2_keep_two(const ck_l1 *l1, int shard, int64_t step, int64_t also) {
  int64_t keep[2] = {step, also};
  if (!l1->dir[0]) return;
  each_copy(l1, CK_L2_SUB, shard, drop_other, keep);
}

void ck_l1_keep_only(const ck_l1 *l1, int rank, int64_t step) { ck_l1_keep_two(l1, rank, step, -1); }

void ck_l2_keep_only(const ck_l1 *l1, int shard, int64_t step) { ck_l2_keep_two(l1, shard, step, -1); }

/* ---- L1/L2 steps' manifests -------------------------------------------------------------- */

ftl_err ck_l1_manifest_path(const ck_l1 *l1, int64_t step, char *out, size_t size) {
  char sd[PATH_MAX];
  ftl_err rc = ck_l1_step_dir(l1, step, sd, sizeof sd);
  return rc ? rc : ftl_fmt(out, size, "%s/manifest.json", sd);
}

int ck_l1_list_committed(const ck_l1 *l1, int64_t *steps, int max) {
  ck_step_entry *v = NULL;
  int n = 0, k = 0;
  if (!l1->dir[0] || ck_list_steps(l1->dir, &v, &n, NULL)) return 0;
  for (int i = 0; i < n && k < max; i++)
    if (v[i].state == CK_STEP_COMMITTED) steps[k++] = v[i].step;
  ftl_free(v);
  return k;
}

void ck_l1_drop_manifests(const ck_l1 *l1, int64_t step, int64_t also) {
  ck_step_entry *v = NULL;
  int n = 0;
  if (!l1->dir[0] || ck_list_steps(l1->dir, &v, &n, NULL)) return;
  for (int i = 0; i < n; i++) {
    char path[PATH_MAX], sd[PATH_MAX];
    if (v[i].step == step || v[i].step == also || v[i].state == CK_STEP_REFUSED ||
        ck_l1_manifest_path(l1, v[i].step, path, sizeof path) || ck_l1_step_dir(l1, v[i].step, sd, sizeof sd))
      continue;
    core_fs_table.unlink(path);
    core_fs_table.unlinkat(AT_FDCWD, sd, AT_REMOVEDIR); /* fails while copies are still there: their owners remove them, and the folder */
  }
  ftl_free(v);
}

static void drop_one(const ck_l1 *l1, const char *sub, int rank, int64_t step) {
  char sd[PATH_MAX], path[PATH_MAX], file[CK_FILE_MAX];
  ck_shard_file_name(rank, file);
  if (ck_l1_step_dir(l1, step, sd, sizeof sd) ||
      ftl_fmt(path, sizeof path, "%s/%s%s%s", sd, sub, *sub ? "/" : "", file))
    return;
  remove_copy(l1, sub, step, path);
}

void ck_l1_drop(const ck_l1 *l1, int rank, int64_t step) { drop_one(l1, "", rank, step); }

void ck_l2_drop(const ck_l1 *l1, int shard, int64_t step) { drop_one(l1, CK_L2_SUB, shard, step); }

/* Removes ftl's shard files (shard-NNNNN.h5 and what starts so: .tmp, a fetched copy) in folder. */
static void remove_shard_files(const char *folder) {
  DIR *inner = opendir(folder);
  if (!inner) return;
  struct dirent *f;
  while ((f = readdir(inner)) != NULL) {
    int rank;
    char path[PATH_MAX];
    if (sscanf(f->d_name, "shard-%5d.h5", &rank) != 1 || ftl_fmt(path, sizeof path, "%s/%s", folder, f->d_name)) continue;
    core_fs_table.unlink(path);
  }
  closedir(inner);
}

int ck_l1_find_run(const char *root, const char *run_dir, char *out, size_t size) {
  struct stat st;
  if (!root || !*root || !run_folder(root, run_dir, out, size)) return 0;
  /* Read only, and only this user's own folder (never through a link someone planted). */
  return lstat(out, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 022) == 0;
}

void ck_l1_forget_run(const char *root, const char *run_dir) {
  char top[PATH_MAX];
  if (!root || !*root || !run_folder(root, run_dir, top, sizeof top)) return;
  if (not_private(top)) return; /* never deletes through a link someone put in a shared folder */
  DIR *dir = opendir(top);
  if (!dir) return;
  struct dirent *e;
  while ((e = readdir(dir)) != NULL) {
    int64_t step;
    if (!ck_parse_step_name(e->d_name, &step)) continue;
    char sd[PATH_MAX], pd[PATH_MAX];
    if (ftl_fmt(sd, sizeof sd, "%s/%s", top, e->d_name) || ftl_fmt(pd, sizeof pd, "%s/%s", sd, CK_L2_SUB)) continue;
    remove_shard_files(pd);
    core_fs_table.unlinkat(AT_FDCWD, pd, AT_REMOVEDIR);
    remove_shard_files(sd);
    /* An L1/L2 step's manifest (its temporary files, manifest.json.tmp.<pid>, are removed by
     * their writer, or stay with a writer that died: the folder then stays too). */
    if (ftl_fmt(pd, sizeof pd, "%s/manifest.json", sd) == FTL_OK) core_fs_table.unlink(pd);
    core_fs_table.unlinkat(AT_FDCWD, sd, AT_REMOVEDIR);
  }
  closedir(dir);
  core_fs_table.unlinkat(AT_FDCWD, top, AT_REMOVEDIR);
}
