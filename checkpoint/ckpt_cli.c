/* checkpoint/ckpt_cli.c: `ftl ckpt ls RUNDIR`, `ftl ckpt verify RUNDIR [STEP] [--level L]`,
 * `ftl ckpt show RUNDIR STEP [--level L]` (declared in checkpoint/door.h; docs/checkpoint.md).
 *
 * RUNDIR is a run directory (its checkpoints are in RUNDIR/checkpoints) or the checkpoints folder
 * itself. verify reads every byte of every shard of the step (size, per-tensor and whole-file
 * XXH3) and checks that HDF5's own structure puts each dataset where the manifest says. The level
 * (l3, the default: the run directory) picks the copies: l1 the shards' own copies in this host's
 * L1 folder of the run, l2 the partner copies kept there (checkpoint/levels.h), each one the
 * manifest places on this host.
 *
 * Map: helpers; `ls`; the levels (a step's manifest, folder and host at a level); `verify`;
 * `show`; the command line (--level, the level's folders, ck_ckpt_cli_main).
 *
 * Not here: anything that needs MPI or a running gang. */
#include "checkpoint/door.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "checkpoint/catalog.h"
#include "checkpoint/h5.h"
#include "checkpoint/levels.h"
#include "checkpoint/shard.h"
#include "core/rundir.h"
#include "ftl/core.h"

/* ---- helpers --------------------------------------------------------------------------------- */

#define CLI_CHUNK (8u << 20)

static int usage(void) {
  fprintf(stderr, "usage: ftl ckpt ls RUNDIR\n"
                  "       ftl ckpt verify RUNDIR [STEP] [--level l1|l2|l3]\n"
                  "       ftl ckpt show RUNDIR STEP [--level l1|l2|l3]\n"
                  "RUNDIR is a run directory (checkpoints in RUNDIR/checkpoints) or a checkpoints folder.\n"
                  "--level: which copies: l3 the run directory's (the default), l1 the shards' own copies in this\n"
                  "host's L1 folder (FTL_CKPT_L1_DIR, else /dev/shm), l2 the partner copies kept there.\n");
  return 2;
}

static int is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* RUNDIR/checkpoints when it exists, else RUNDIR itself when it is a folder. */
static int resolve_base(const char *rundir, char *base, size_t size) {
  if (core_rundir_path(base, size, rundir, FTL_RUNDIR_CHECKPOINTS) == FTL_OK && is_dir(base)) return 0;
  if (is_dir(rundir) && ftl_fmt(base, size, "%s", rundir) == FTL_OK) return 0;
  fprintf(stderr, "ftl ckpt: %s is not a folder\n", rundir);
  return -1;
}

static const char *state_name(ck_step_state s) {
  return s == CK_STEP_COMMITTED ? "committed"
         : s == CK_STEP_BAD     ? "bad"
         : s == CK_STEP_REFUSED ? "refused"
                                : "incomplete";
}

static uint64_t total_bytes(const ck_manifest *m) {
  uint64_t t = 0;
  for (int r = 0; r < m->world_size; r++)
    t += m->shards[r].size_bytes;
  return t;
}

static void fmt_time(int64_t us, char *buf, size_t size) {
  time_t t = (time_t)(us / 1000000);
  struct tm tm;
  if (us <= 0 || !gmtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) snprintf(buf, size, "-");
}

/* The levels at which every shard of m has a copy, as the manifest says ("l1+l2+l3"): L3 when the
 * manifest commits it in the run directory. A copy in host memory may since have gone with its
 * host; a restore checks each one. */
static void levels_of(const ck_manifest *m, char *out, size_t size) {
  int l1 = m->world_size > 0, l2 = m->world_size > 0;
  for (int r = 0; r < m->world_size; r++) {
    l1 &= m->shards[r].l1_host[0] != '\0';
    l2 &= m->shards[r].l2_host[0] != '\0';
  }
  snprintf(out, size, "%s%s%s", l1 ? (l2 || m->l3 ? "l1+" : "l1") : "", l2 ? (m->l3 ? "l2+" : "l2") : "",
           m->l3 ? "l3" : "");
}

/* ---- ls -------------------------------------------------------------------------------------- */

/* One row of `ftl ckpt ls` for a step of folder base (the run directory's checkpoints, or this
 * host's L1 folder of the run, where steps saved below L3 are committed). */
static void ls_row(const char *base, const ck_step_entry *e, const char *where) {
  char when[32] = "-", note[1100] = "", levels[16] = "-";
  int world = 0;
  unsigned long long bytes = 0;
  if (e->state == CK_STEP_COMMITTED) {
    ck_manifest *m = NULL;
    ftl_diag md = {{0}};
    if (ck_read_manifest(base, e->step, &m, NULL, NULL, &md) == FTL_OK) {
      world = m->world_size;
      bytes = (unsigned long long)total_bytes(m);
      fmt_time(m->created_unix_us, when, sizeof when);
      levels_of(m, levels, sizeof levels);
      if (where) snprintf(note, sizeof note, "in this host's memory: %s", where);
      ck_manifest_free(m);
    } else {
      snprintf(note, sizeof note, "unreadable manifest: %s", md.msg);
    }
  } else if (e->state == CK_STEP_REFUSED) {
    ftl_diag rd = {{0}};
    ck_step_dir_check(base, e->step, &rd);
    snprintf(note, sizeof note, "%s", rd.msg);
  } else if (e->state == CK_STEP_BAD) {
    ck_read_bad_reason(base, e->step, note, sizeof note);
  }
  char w[16] = "-";
  if (world) snprintf(w, sizeof w, "%d", world);
  printf("%-12lld %-11s %6s %14llu  %-20s %-9s %s\n", (long long)e->step, state_name(e->state), w, bytes, when, levels,
         note);
}

/* This host's L1 folder of the run whose checkpoints are in base, into l1dir: 1 when there is one
 * (this user's own private folder, ck_l1_find_run). */
static int find_l1(const char *base, char *l1dir, size_t size) {
  char run_dir[PATH_MAX];
  size_t len = strlen(base);
  /* base is RUNDIR/checkpoints: the L1 folder is named after RUNDIR. */
  size_t cut = strlen("/checkpoints");
  if (len <= cut || strcmp(base + len - cut, "/checkpoints") != 0 ||
      ftl_fmt(run_dir, sizeof run_dir, "%.*s", (int)(len - cut), base))
    return 0;
  return ck_l1_find_run(ck_l1_default_root(), run_dir, l1dir, size);
}

/* The steps below L3 this host's L1 folder commits for the run whose checkpoints are in base; *n 0
 * when there is none. */
static void l1_steps(const char *base, char *l1dir, size_t size, ck_step_entry **v, int *n) {
  *v = NULL;
  *n = 0;
  if (!find_l1(base, l1dir, size) || ck_list_steps(l1dir, v, n, NULL)) return;
  int k = 0;
  for (int i = 0; i < *n; i++)
    if ((*v)[i].state == CK_STEP_COMMITTED) (*v)[k++] = (*v)[i];
  *n = k;
}

static int cmd_ls(const char *base) {
  ck_step_entry *steps = NULL, *l1 = NULL;
  int n = 0, nl1 = 0;
  char l1dir[PATH_MAX] = "";
  ftl_diag d = {{0}};
  if (ck_list_steps(base, &steps, &n, &d)) {
    fprintf(stderr, "ftl ckpt ls: %s\n", d.msg);
    return 2;
  }
  l1_steps(base, l1dir, sizeof l1dir, &l1, &nl1);
  printf("%-12s %-11s %6s %14s  %-20s %-9s %s\n", "STEP", "STATE", "WORLD", "BYTES", "CREATED", "LEVELS", "NOTE");
  /* Both lists are newest first: merged, the run directory's first for a step in both. */
  for (int i = 0, k = 0; i < n || k < nl1;) {
    if (k < nl1 && (i >= n || l1[k].step > steps[i].step))
      ls_row(l1dir, &l1[k++], l1dir);
    else
      ls_row(base, &steps[i++], NULL);
  }
  if (n == 0 && nl1 == 0) printf("(no checkpoints in %s)\n", base);
  ftl_free(steps);
  ftl_free(l1);
  return 0;
}

/* ---- levels ---------------------------------------------------------------------------------- */

/* Where verify and show read a step: its level (1, 2, 3), the run directory's checkpoints (base)
 * and, below L3, this host's L1 folder of the run ("" when there is none). */
typedef struct cli_level {
  int level;
  const char *base;
  char l1dir[PATH_MAX];
} cli_level;

/* The manifest of step at lv: the run directory's; below L3 the copy in this host's L1 folder (a
 * step saved below L3), else the run directory's (an L3 step whose copies L1 and L2 keep too). */
static ftl_err level_manifest(const cli_level *lv, int64_t step, ck_manifest **m, ftl_diag *d) {
  if (lv->level == 3) return ck_read_manifest(lv->base, step, m, NULL, NULL, d);
  ftl_err rc = ck_read_manifest(lv->l1dir, step, m, NULL, NULL, d);
  if (rc != FTL_ERR_NOTFOUND) return rc;
  memset(d, 0, sizeof *d);
  rc = ck_read_manifest(lv->base, step, m, NULL, NULL, d);
  if (rc == FTL_ERR_NOTFOUND)
    ftl_diag_fail(d, rc, "no manifest of step %lld in this host's L1 folder %s or in %s", (long long)step, lv->l1dir,
                  lv->base);
  return rc;
}

/* The folder of step's copies at lv (L2: the step's partner/ in the L1 folder). */
static ftl_err level_dir(const cli_level *lv, int64_t step, char *out, size_t size) {
  if (lv->level == 3) return ck_step_dir(lv->base, step, out, size);
  ftl_err rc = ck_step_dir(lv->l1dir, step, out, size);
  if (rc || lv->level == 1) return rc;
  size_t u = strlen(out);
  return ftl_fmt(out + u, size - u, "/%s", CK_L2_SUB);
}

/* The host the manifest places shard sh's copy at lv on ("" none); NULL at L3 (the run directory
 * has every shard). */
static const char *level_host(const cli_level *lv, const ck_shard *sh) {
  return lv->level == 3 ? NULL : lv->level == 1 ? sh->l1_host : sh->l2_host;
}

/* ---- verify ---------------------------------------------------------------------------------- */

/* Verifies the copies of one committed step at lv; prints one line per shard. Below L3 only the
 * copies the manifest places on this host are read (the others are said to be elsewhere). Returns 0
 * ok, 1 failed; *copies gets how many copies were verified. */
static int verify_step(const cli_level *lv, int64_t step, void *bounce, int *copies) {
  ck_manifest *m = NULL;
  ftl_diag d = {{0}};
  char sd[PATH_MAX];
  int failed = 0;
  *copies = 0;
  if (level_manifest(lv, step, &m, &d)) {
    printf("step %lld: FAILED: %s\n", (long long)step, d.msg);
    return 1;
  }
  if (level_dir(lv, step, sd, sizeof sd)) {
    ck_manifest_free(m);
    return 1;
  }
  for (int r = 0; r < m->world_size; r++) {
    const ck_shard *sh = &m->shards[r];
    const char *host = level_host(lv, sh);
    if (host && strcmp(host, ftl_hostname()) != 0) {
      printf("step %lld: %s: no l%d copy on this host (%s)\n", (long long)step, sh->file, lv->level,
             host[0] ? host : "none made");
      continue;
    }
    ftl_diag sdg = {{0}};
    ftl_err rc = ck_shard_verify_read(sd, m, sh, NULL, 0, CLI_CHUNK, bounce, CLI_CHUNK, &sdg);
    char path[PATH_MAX];
    /* The manifest's own checksums cannot catch an edit of the manifest: its dtypes, shapes,
     * layouts and step are checked against each shard's own HDF5 description. */
    if (rc == FTL_OK) {
      if (ftl_fmt(path, sizeof path, "%s/%s", sd, sh->file))
        rc = ftl_diag_fail(&sdg, FTL_ERR_RANGE, "path too long");
      else
        rc = ck_h5_check_shard(path, m, sh, &sdg);
    }
    (*copies)++;
    if (rc) {
      printf("step %lld: %s%s%s: FAILED: %s\n", (long long)step, host ? sd : "", host ? "/" : "", sh->file, sdg.msg);
      failed = 1;
    } else {
      printf("step %lld: %s%s%s: ok (%llu bytes, %d datasets, xxh3 %016llx)\n", (long long)step, host ? sd : "",
             host ? "/" : "", sh->file, (unsigned long long)sh->size_bytes, sh->npieces,
             (unsigned long long)sh->checksum);
    }
  }
  if (*copies)
    printf("step %lld: %s\n", (long long)step, failed ? "FAILED" : "verified");
  else
    printf("step %lld: no l%d copy on this host\n", (long long)step, lv->level);
  ck_manifest_free(m);
  return failed;
}

/* Whether verify goes through step of the folder listed at lv: a committed step there; below L3
 * also a step folder of the L1 folder whose step the run directory commits (an L3 step's copies). */
static int to_verify(const cli_level *lv, const ck_step_entry *e) {
  if (e->state == CK_STEP_COMMITTED) return 1;
  if (lv->level == 3 || e->state != CK_STEP_INCOMPLETE) return 0;
  char path[PATH_MAX];
  struct stat st;
  return ck_step_dir(lv->base, e->step, path, sizeof path) == FTL_OK &&
         ftl_fmt(path + strlen(path), sizeof path - strlen(path), "/manifest.json") == FTL_OK &&
         lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int cmd_verify(const cli_level *lv, const char *step_text) {
  int failed = 0, checked = 0, copies = 0;
  void *bounce = ftl_malloc(CLI_CHUNK);
  ck_step_entry *steps = NULL;
  int n = 0;
  ftl_diag d = {{0}};
  const char *listed = lv->level == 3 ? lv->base : lv->l1dir;
  if (!bounce) {
    fprintf(stderr, "ftl ckpt verify: out of memory\n");
    return 2;
  }
  if (step_text) {
    int64_t step;
    if (ftl_parse_i64(step_text, 0, INT64_MAX, &step)) {
      ftl_free(bounce);
      return usage();
    }
    failed = verify_step(lv, step, bounce, &copies);
    checked = copies > 0;
  } else {
    if (ck_list_steps(listed, &steps, &n, &d)) {
      fprintf(stderr, "ftl ckpt verify: %s\n", d.msg);
      ftl_free(bounce);
      return 2;
    }
    for (int i = 0; i < n; i++) {
      if (steps[i].state == CK_STEP_REFUSED) {
        ftl_diag rd = {{0}};
        ck_step_dir_check(listed, steps[i].step, &rd);
        printf("step %lld: REFUSED: %s\n", (long long)steps[i].step, rd.msg);
        failed = 1;
        continue;
      }
      if (!to_verify(lv, &steps[i])) continue;
      failed |= verify_step(lv, steps[i].step, bounce, &copies);
      checked += copies > 0;
    }
    if (!checked) printf("no committed checkpoint with a copy at l%d in %s\n", lv->level, listed);
  }
  ftl_free(steps);
  ftl_free(bounce);
  return (failed || !checked) ? 1 : 0;
}

/* ---- show ------------------------------------------------------------------------------------ */

static void print_shape(const ck_item *it) {
  printf("[");
  for (int k = 0; k < it->ndim; k++)
    printf("%s%lld", k ? ", " : "", (long long)it->shape[k]);
  printf("]");
}

static int cmd_show(const cli_level *lv, const char *step_text) {
  int64_t step;
  if (ftl_parse_i64(step_text, 0, INT64_MAX, &step)) return usage();
  ck_manifest *m = NULL;
  ftl_diag d = {{0}};
  char sd[PATH_MAX] = "";
  if (level_manifest(lv, step, &m, &d)) {
    fprintf(stderr, "ftl ckpt show: step %lld: %s\n", (long long)step, d.msg);
    return 1;
  }
  if (level_dir(lv, step, sd, sizeof sd)) sd[0] = '\0';
  char when[32];
  fmt_time(m->created_unix_us, when, sizeof when);
  printf("step %lld  world_size %d  created %s  bytes %llu  job_spec_hash %s\n", (long long)m->step, m->world_size,
         when, (unsigned long long)total_bytes(m), m->job_spec_hash[0] ? m->job_spec_hash : "-");
  printf("items:\n");
  for (int i = 0; i < m->nitems; i++) {
    const ck_item *it = &m->items[i];
    printf("  %-24s %-13s %-5s ", it->name, ck_kind_name(it->kind), ck_dtype_name(it->dtype));
    print_shape(it);
    printf("\n");
  }
  printf("shards:\n");
  for (int r = 0; r < m->world_size; r++) {
    const ck_shard *sh = &m->shards[r];
    printf("  %s  %llu bytes  xxh3 %016llx%s%s%s%s\n", sh->file, (unsigned long long)sh->size_bytes,
           (unsigned long long)sh->checksum, sh->l1_host[0] ? "  l1 on " : "", sh->l1_host,
           sh->l2_host[0] ? "  l2 on " : "", sh->l2_host);
    /* Below L3: where this host's copy at the level is, when the manifest places one here. */
    const char *host = level_host(lv, sh);
    if (host && strcmp(host, ftl_hostname()) == 0 && sd[0])
      printf("    l%d copy here: %s/%s\n", lv->level, sd, sh->file);
    for (int p = 0; p < sh->npieces; p++) {
      const ck_piece *pc = &sh->pieces[p];
      printf("    %-24s rows %lld..%lld  at byte %llu, %llu bytes, xxh3 %016llx\n", m->items[pc->item].name,
             (long long)pc->row_start, (long long)(pc->row_start + pc->row_count - 1),
             (unsigned long long)pc->file_offset, (unsigned long long)pc->size_bytes, (unsigned long long)pc->checksum);
    }
  }
  ck_manifest_free(m);
  return 0;
}

/* ---- the command line ------------------------------------------------------------------------ */

/* Takes --level L (or --level=L) out of argv: *level 1, 2 or 3 (3 when not given). -1: malformed. */
static int take_level(int *argc, char **argv, int *level) {
  *level = 3;
  for (int i = 1; i < *argc; i++) {
    const char *v = NULL;
    int used = 0;
    if (strcmp(argv[i], "--level") == 0 && i + 1 < *argc) {
      v = argv[i + 1];
      used = 2;
    } else if (strncmp(argv[i], "--level=", 8) == 0) {
      v = argv[i] + 8;
      used = 1;
    } else if (strcmp(argv[i], "--level") == 0) {
      return -1;
    }
    if (!v) continue;
    if (strcmp(v, "l1") && strcmp(v, "l2") && strcmp(v, "l3")) return -1;
    *level = v[1] - '0';
    for (int k = i; k + used < *argc; k++)
      argv[k] = argv[k + used];
    *argc -= used;
    i--;
  }
  return 0;
}

/* The level's folders for base; below L3 this host's L1 folder must exist (else 1 with a message). */
static int open_level(cli_level *lv, int level, const char *base) {
  memset(lv, 0, sizeof *lv);
  lv->level = level;
  lv->base = base;
  if (level == 3 || find_l1(base, lv->l1dir, sizeof lv->l1dir)) return 0;
  printf("no L1 folder of %s on this host (under %s): no l%d copy to read here\n", base, ck_l1_default_root(), level);
  return 1;
}

int ck_ckpt_cli_main(int argc, char **argv) {
  int level;
  if (take_level(&argc, argv, &level) || argc < 3) return usage();
  char base[PATH_MAX];
  cli_level lv;
  const char *cmd = argv[1];
  if (strcmp(cmd, "ls") == 0 && argc == 3 && level == 3) {
    if (resolve_base(argv[2], base, sizeof base)) return 2;
    return cmd_ls(base);
  }
  if (strcmp(cmd, "verify") == 0 && (argc == 3 || argc == 4)) {
    if (resolve_base(argv[2], base, sizeof base)) return 2;
    if (open_level(&lv, level, base)) return 1;
    return cmd_verify(&lv, argc == 4 ? argv[3] : NULL);
  }
  if (strcmp(cmd, "show") == 0 && argc == 4) {
    if (resolve_base(argv[2], base, sizeof base)) return 2;
    if (open_level(&lv, level, base)) return 1;
    return cmd_show(&lv, argv[3]);
  }
  return usage();
}
