/* bench/scale/scale_ckpt.c: `ftl-scale-ckpt`, the checkpoint's metadata at scale (bench/scale/run.sh).
 *
 *   ftl-scale-ckpt commit WORK_DIR N...       rank 0's side of a commit of N shards, with the real
 *       code: the manifest built from N ranks' piece records as ckpt_writer.c builds it (4 split
 *       tensors, so 4 pieces per shard), encoded (ck_manifest_to_json) and written durably
 *       (core_fs_write_atomic: tmp, fsync, rename, fsync of the folder: the commit); then restore
 *       planning, what every restore does first: the manifest read and parsed with every check
 *       (ck_read_manifest: coverage, overlaps, sizes). Median of 5 rounds; one table row per N.
 *   ftl-scale-ckpt catalog RUN_DIR STEPS      makes a synthetic run directory of STEPS committed
 *       steps (manifests of 2 shards, no shard files: the catalog reads manifests only), then
 *       times ck_list_steps (the keep rule's and the restore's scan) and the list plus every
 *       manifest's read (what `ftl ckpt ls` does; run.sh times the real command too).
 *
 * The gather of the records to rank 0 is MPI's and is not simulated here (docs/scale.md). Not here:
 * shard data (bench/ckpt). A benchmark program: it prints, and exits 2 with the reason on an error. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "checkpoint/catalog.h"
#include "checkpoint/manifest.h"
#include "core/fs.h"
#include "ftl/core.h"

enum { ITEMS = 4, ROWS_PER_RANK = 16, COLS = 64, ROUNDS = 5, HEADER_BYTES = 1024 };

static double ms_since(int64_t t0_ns) { return (double)(ftl_clock_ns() - t0_ns) / 1e6; }

/* This process's CPU time: on a shared machine the wall time of a commit says as much about the
 * other tenants as about ftl. */
static double cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return v[n / 2];
}

/* The manifest of a step of `world` shards, as rank 0 builds it from the gathered records. */
static ftl_err build_manifest(int world, int64_t step, ck_manifest **out, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  ck_manifest *m = ck_manifest_alloc(ITEMS, world);
  if (!m) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  m->step = step;
  m->created_unix_us = ftl_wall_us();
  for (int i = 0; i < ITEMS; i++) {
    ck_item *it = &m->items[i];
    snprintf(it->name, sizeof it->name, "layer%d.weight", i);
    it->dtype = FTL_DTYPE_F32;
    it->kind = CK_KIND_SPLIT;
    it->ndim = 2;
    it->shape[0] = (int64_t)world * ROWS_PER_RANK;
    it->shape[1] = COLS;
  }
  uint64_t piece_bytes = (uint64_t)ROWS_PER_RANK * COLS * 4;
  for (int r = 0; r < world; r++) {
    ck_shard *sh = &m->shards[r];
    sh->rank = r;
    ck_shard_file_name(r, sh->file);
    sh->size_bytes = HEADER_BYTES + ITEMS * piece_bytes;
    sh->checksum = 0x9e3779b97f4a7c15ull * (uint64_t)(r + 1);
    sh->pieces = ftl_calloc(ITEMS, sizeof *sh->pieces);
    if (!sh->pieces) {
      rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
      goto out;
    }
    for (int i = 0; i < ITEMS; i++) {
      int64_t start = 0, count = 0;
      ck_split_rows(m->items[i].shape[0], r, world, &start, &count);
      sh->pieces[sh->npieces++] = (ck_piece){.item = i,
                                             .row_start = start,
                                             .row_count = count,
                                             .file_offset = HEADER_BYTES + (uint64_t)i * piece_bytes,
                                             .size_bytes = (uint64_t)count * COLS * 4,
                                             .checksum = sh->checksum ^ (uint64_t)i};
    }
  }
  *out = m;
  m = NULL;
out:
  ck_manifest_free(m);
  return rc;
}

/* One commit of `world` shards under base: build, encode, write durably; *write_ms: the durable
 * write alone (the disk's share). */
static ftl_err commit_once(const char *base, int world, int64_t step, size_t *bytes, double *write_ms, ftl_diag *d) {
  ck_manifest *m = NULL;
  char *text = NULL, sd[PATH_MAX], path[PATH_MAX];
  size_t len = 0;
  ftl_err rc = build_manifest(world, step, &m, d);
  if (rc) goto out;
  if ((rc = ck_manifest_to_json(m, &text, &len, d))) goto out;
  if (ck_step_dir(base, step, sd, sizeof sd) || ftl_fmt(path, sizeof path, "%s/manifest.json", sd)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long under %s", base);
    goto out;
  }
  if ((rc = ftl_mkdir_p(sd, d))) goto out;
  int64_t t0 = ftl_clock_ns();
  rc = core_fs_write_atomic(path, text, len, NULL, 0, step, d);
  *write_ms = ms_since(t0);
  *bytes = len;
out:
  ftl_free(text);
  ck_manifest_free(m);
  return rc;
}

static int cmd_commit(const char *work, int argc, char **argv) {
  char base[PATH_MAX];
  ftl_diag d = {{0}};
  if (ftl_fmt(base, sizeof base, "%s/checkpoints", work) || ftl_mkdir_p(base, &d)) {
    fprintf(stderr, "ftl-scale-ckpt: cannot make %s/checkpoints: %s\n", work, d.msg);
    return 2;
  }
  printf("checkpoint commit at scale: rank 0 builds, encodes and durably writes the manifest of N shards (4 pieces "
         "each); restore planning reads and validates it; median of %d rounds (ms)\n",
         ROUNDS);
  printf("machine: 2 cores shared with other work; the disk of %s\n", work);
  printf("%7s %12s %12s %12s %12s %12s\n", "N", "commit ms", "of it write", "commit cpu", "plan ms", "manifest KiB");
  double base_commit = 0, base_plan = 0, per_shard = 0;
  int base_n = 0;
  double commits[64], plans[64], writes[64], cpus[64];
  int ns[64], count = 0;
  for (int a = 0; a < argc && count < 64; a++) {
    int64_t n = 0;
    if (ftl_parse_i64(argv[a], 1, 1 << 20, &n)) {
      fprintf(stderr, "ftl-scale-ckpt: N must be 1..%d, not '%s'\n", 1 << 20, argv[a]);
      return 2;
    }
    double c[ROUNDS], p[ROUNDS], w[ROUNDS], u[ROUNDS];
    size_t bytes = 0;
    int failed = 0;
    for (int k = 0; k < ROUNDS && !failed; k++) {
      int64_t step = n * 100 + k;
      int64_t t0 = ftl_clock_ns();
      double u0 = cpu_ms();
      /* A size the checkpoint itself refuses (a manifest past CK_MANIFEST_MAX_BYTES) is a finding of
       * the table, said in its row; the sweep goes on. */
      if (commit_once(base, (int)n, step, &bytes, &w[k], &d)) {
        printf("%7lld not run: the commit failed: %s", (long long)n, d.msg);
        if (count > 0) /* what it would have needed, at the last size's bytes per shard */
          printf(" (about %.0f MiB needed)", per_shard * (double)n / 1048576.0);
        printf("\n");
        failed = 1;
        break;
      }
      c[k] = ms_since(t0);
      u[k] = cpu_ms() - u0;
      ck_manifest *m = NULL;
      t0 = ftl_clock_ns();
      if (ck_read_manifest(base, step, &m, NULL, NULL, &d)) {
        printf("%7lld not run: restore planning failed: %s\n", (long long)n, d.msg);
        ck_delete_step(base, step, &d);
        failed = 1;
        break;
      }
      p[k] = ms_since(t0);
      ck_manifest_free(m);
      if (ck_delete_step(base, step, &d)) {
        fprintf(stderr, "ftl-scale-ckpt: %s\n", d.msg);
        return 2;
      }
    }
    if (failed) {
      fflush(stdout);
      continue;
    }
    per_shard = (double)bytes / (double)n;
    commits[count] = median(c, ROUNDS);
    plans[count] = median(p, ROUNDS);
    writes[count] = median(w, ROUNDS);
    cpus[count] = median(u, ROUNDS);
    ns[count++] = (int)n;
    if (!base_n) {
      base_n = (int)n;
      base_commit = commits[0];
      base_plan = plans[0];
    }
    printf("%7lld %12.2f %12.2f %12.2f %12.2f %12.1f\n", (long long)n, commits[count - 1], writes[count - 1],
           cpus[count - 1], plans[count - 1], (double)bytes / 1024.0);
    fflush(stdout);
  }
  printf("ratio to N=%d (N ratio, N log N ratio)\n", base_n);
  for (int i = 0; i < count; i++) {
    double nr = (double)ns[i] / base_n;
    double nl = nr * (base_n > 1 ? log((double)ns[i]) / log((double)base_n) : 1.0);
    printf("%7d %12.2f %12.2f   N x%.0f, N log N x%.1f\n", ns[i], commits[i] / base_commit, plans[i] / base_plan, nr,
           nl);
  }
  printf("goal: the commit of 16384 shards <= 100 ms (of it write: the tmp file's write, fsync, rename and the folder's "
         "fsync, the disk's share; commit cpu: this process's CPU meanwhile)\n");
  return 0;
}

static int cmd_catalog(const char *rundir, int64_t steps) {
  char base[PATH_MAX];
  ftl_diag d = {{0}};
  if (ftl_fmt(base, sizeof base, "%s/checkpoints", rundir) || ftl_mkdir_p(base, &d)) {
    fprintf(stderr, "ftl-scale-ckpt: cannot make %s/checkpoints: %s\n", rundir, d.msg);
    return 2;
  }
  /* The synthetic run: STEPS committed steps of 2 shards, written plainly (the fsyncs of a real
   * commit are the commit table's business, not the catalog's). */
  int64_t t0 = ftl_clock_ns();
  for (int64_t s = 1; s <= steps; s++) {
    ck_manifest *m = NULL;
    char *text = NULL, sd[PATH_MAX], path[PATH_MAX];
    size_t len = 0;
    ftl_err rc = build_manifest(2, s, &m, &d);
    if (!rc) rc = ck_manifest_to_json(m, &text, &len, &d);
    if (!rc && (ck_step_dir(base, s, sd, sizeof sd) || ftl_fmt(path, sizeof path, "%s/manifest.json", sd)))
      rc = ftl_diag_fail(&d, FTL_ERR_RANGE, "path too long");
    if (!rc && mkdir(sd, 0755) != 0 && errno != EEXIST)
      rc = ftl_diag_fail(&d, FTL_ERR_IO, "mkdir %s: %s", sd, strerror(errno));
    FILE *f = rc ? NULL : fopen(path, "w");
    if (!rc && (!f || fwrite(text, 1, len, f) != len)) rc = ftl_diag_fail(&d, FTL_ERR_IO, "cannot write %s", path);
    if (f) fclose(f);
    ftl_free(text);
    ck_manifest_free(m);
    if (rc) {
      fprintf(stderr, "ftl-scale-ckpt: %s\n", d.msg);
      return 2;
    }
  }
  double made_ms = ms_since(t0);
  double list[ROUNDS], ls[ROUNDS];
  int n = 0;
  for (int k = 0; k < ROUNDS; k++) {
    ck_step_entry *v = NULL;
    t0 = ftl_clock_ns();
    if (ck_list_steps(base, &v, &n, &d)) {
      fprintf(stderr, "ftl-scale-ckpt: %s\n", d.msg);
      return 2;
    }
    list[k] = ms_since(t0);
    t0 = ftl_clock_ns();
    for (int i = 0; i < n; i++) {
      ck_manifest *m = NULL;
      if (ck_read_manifest(base, v[i].step, &m, NULL, NULL, &d)) {
        fprintf(stderr, "ftl-scale-ckpt: step %lld: %s\n", (long long)v[i].step, d.msg);
        ftl_free(v);
        return 2;
      }
      ck_manifest_free(m);
    }
    ls[k] = list[k] + ms_since(t0);
    ftl_free(v);
  }
  printf("catalog: %lld committed steps (made in %.0f ms), median of %d rounds\n", (long long)steps, made_ms, ROUNDS);
  printf("  %-44s %10.2f ms (%.2f us per step)\n", "scan (ck_list_steps)", median(list, ROUNDS),
         median(list, ROUNDS) * 1000.0 / (double)(n ? n : 1));
  printf("  %-44s %10.2f ms (%.2f us per step)\n", "scan + every manifest read (ftl ckpt ls's work)",
         median(ls, ROUNDS), median(ls, ROUNDS) * 1000.0 / (double)(n ? n : 1));
  return n == steps ? 0 : 2;
}

int main(int argc, char **argv) {
  if (argc >= 4 && !strcmp(argv[1], "commit")) return cmd_commit(argv[2], argc - 3, argv + 3);
  int64_t steps = 0;
  if (argc == 4 && !strcmp(argv[1], "catalog") && ftl_parse_i64(argv[3], 1, 10000000, &steps) == FTL_OK)
    return cmd_catalog(argv[2], steps);
  fprintf(stderr, "usage: ftl-scale-ckpt commit WORK_DIR N... | ftl-scale-ckpt catalog RUN_DIR STEPS\n");
  return 2;
}
