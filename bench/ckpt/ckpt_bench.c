/* bench/ckpt/ckpt_bench.c: ftl checkpoints side by side with their baselines, in one run, for
 * each size of per-rank state (pre-faulted), all ranks at once, max over ranks, median of reps:
 *   stall (ftl_ckpt_save returns)         vs  memcpy of the same bytes into pre-faulted memory
 *   time to durable (manifest committed)  vs  raw write() + fsync() of the same bytes
 *   restore (verified, cold cache)        vs  raw read() of the same bytes (cold cache)
 *   stall                                 vs  a synchronous HDF5 write (+ fsync) of the same state
 *   stall with the L1 level on            vs  memcpy (the shard also teed into a tmpfs copy)
 *   restore from L1 (verified)            vs  raw read() of the same bytes from disk (cold cache)
 *   restore from L2 (verified)            vs  raw read() of the same bytes from disk (cold cache)
 *   stall with the L1 and L2 levels on    vs  memcpy
 * (L1: docs/checkpoint.md "Levels", a folder under /dev/shm here; the page cache is dropped before
 * the L1 restore too, of the bench's files on disk only (evict_only says why): the copies in tmpfs
 * stay, which is the point of the level.)
 * (L2: the same section; run.sh starts each rank with a host name of its own (a UTS namespace), so
 * each rank is the other's partner host. Before each L2 restore every rank deletes its own L1 copy,
 * as a lost host's memory is gone: its shard then comes from the partner's copy over a direct TCP
 * connection (FTL_CKPT_L2_TRANSPORT=mpi: over MPI on TCP, run.sh's btl self,tcp), so the bytes
 * cross a real socket, the loopback. Where the ranks share a
 * host name (no namespaces: not root) the L2 row says n/a.)
 * Run it with bench/ckpt/run.sh (2 ranks, 64 MiB and 512 MiB). Usage: ckpt_bench [--smoke] DIR [MiB];
 * --smoke is the smallest size (1 MiB, 3 repetitions, the page cache left alone: the rows say
 * warm), which the test suite runs (tests/bench, `bench/ckpt/run.sh --smoke`) to see that the bench
 * completes and prints its table; its numbers mean nothing. Every timed write and read starts
 * from a dropped page cache (/proc/sys/vm/drop_caches, root only): on this VM, page-cache pages
 * that one side frees are fast for the other side to reuse, so without it whichever side runs
 * second wins or loses by up to 10x. Without root the read rows are labelled warm.
 * The raw read() baseline is the best plain read of the bytes, advised exactly as ftl's verified
 * read advises its own (checkpoint/shard.c): POSIX_FADV_SEQUENTIAL on the open and
 * POSIX_FADV_WILLNEED for the next 8 MiB window before each 8 MiB read. So a restore's ratio is
 * what verification and ftl's bookkeeping cost, not a read-ahead hint only one side had (an earlier
 * bench gave it to ftl alone).
 *
 * The full run is not part of ctest: it takes tens of seconds and its numbers depend on the machine. */
#include <fcntl.h>
#include <ftw.h>
#include <hdf5.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ftl/ckpt.h"
#include "ftl/core.h"
#include "ftl/rdzv.h"

/* Nine: this VM's disk serves the same cold 512 MiB read in anywhere from 0.7 to 1.5 s, one
 * repetition to the next, and the median of five still moved a restore's ratio by +-0.3. */
#define REPS 9
#define CHUNK (8u << 20)
#define ROWS 8 /* the table's rows for each size */

static int rank, world;
static int reps = REPS, smoke; /* --smoke: fewer repetitions, and the page cache is left alone */
static MPI_Comm comm;

static double now_ms(void) { return (double)ftl_clock_ns() / 1e6; }

static double max_over_ranks(double v) {
  double m = 0;
  MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, comm);
  return m;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return v[n / 2];
}

static double minimum(const double *v, int n) {
  double m = v[0];
  for (int i = 1; i < n; i++)
    if (v[i] < m) m = v[i];
  return m;
}

/* Where set (the L1 rows), the page cache is emptied of the files under this folder only, the
 * bench's own files on disk, rather than system-wide: a system-wide drop also runs over tmpfs,
 * where it cannot drop the pages but marks each one for reclaim, and the kernel's fault-around
 * (mapping 16 pages per page fault) passes over pages so marked. The L1 copies would then map a
 * page per fault, 2x slower to read in place, a state a job's memory copies are never in between
 * their save and a restore unless someone drops the caches by hand. */
static const char *evict_only;

static int evict_file(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  if (type != FTW_F) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
  return rc == 0 ? 0 : -1;
}

static int drop_caches(void) {
  if (smoke) return 0; /* a smoke test must not empty a shared machine's page cache */
  sync();
  int ok = 0;
  if (rank == 0 && evict_only) {
    ok = nftw(evict_only, evict_file, 16, FTW_PHYS) == 0;
  } else if (rank == 0) {
    FILE *f = fopen("/proc/sys/vm/drop_caches", "w");
    if (f) {
      ok = fputs("3\n", f) >= 0;
      ok = (fclose(f) == 0) && ok;
    }
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, comm);
  return ok;
}

static void die(const char *what) {
  fprintf(stderr, "rank %d: %s\n", rank, what);
  MPI_Abort(comm, 1);
}

static void write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    size_t c = n < CHUNK ? n : CHUNK;
    ssize_t w = write(fd, p, c);
    if (w <= 0) die("write failed");
    p += w;
    n -= (size_t)w;
  }
}

/* The baseline's read, with the advice ftl's verified read gives (the header says why). */
static void read_all(int fd, char *p, size_t n) {
  size_t off = 0, ahead = 0;
  (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  while (off < n) {
    for (; ahead < n && ahead < off + 2 * (size_t)CHUNK; ahead += CHUNK)
      (void)posix_fadvise(fd, (off_t)ahead, CHUNK, POSIX_FADV_WILLNEED);
    size_t c = n - off < CHUNK ? n - off : CHUNK;
    ssize_t r = read(fd, p + off, c);
    if (r <= 0) die("read failed");
    off += (size_t)r;
  }
}

typedef struct row {
  const char *what, *goal;
  double base, ftl;         /* medians */
  double base_min, ftl_min; /* best of the repetitions: the cost without the machine's noise */
} row;

/* One timed measurement of each kind; the ftl one and its baseline run back to back in every
 * repetition, so both see the same machine (this box is shared and noisy). */
static double time_memcpy(char *dst, const char *src, size_t bytes) {
  MPI_Barrier(comm);
  double t0 = now_ms();
  memcpy(dst, src, bytes);
  return max_over_ranks(now_ms() - t0);
}

static double time_raw_write(const char *path, const char *src, size_t bytes, int *cold) {
  *cold &= drop_caches();
  MPI_Barrier(comm);
  double t0 = now_ms();
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) die("open raw");
  write_all(fd, src, bytes);
  if (fsync(fd) != 0) die("fsync");
  close(fd);
  return max_over_ranks(now_ms() - t0);
}

static double time_raw_read(const char *path, char *dst, size_t bytes, int *cold) {
  *cold &= drop_caches();
  MPI_Barrier(comm);
  double t0 = now_ms();
  int fd = open(path, O_RDONLY);
  if (fd < 0) die("open raw");
  read_all(fd, dst, bytes);
  close(fd);
  return max_over_ranks(now_ms() - t0);
}

static double time_h5_write(const char *path, const char *src, size_t bytes, int64_t row_elems) {
  MPI_Barrier(comm);
  double t0 = now_ms();
  hsize_t dims[2] = {(hsize_t)(bytes / (size_t)(row_elems * 4)), (hsize_t)row_elems};
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t s = H5Screate_simple(2, dims, NULL);
  hid_t d = H5Dcreate2(f, "w", H5T_IEEE_F32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0 || s < 0 || d < 0 || H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, src) < 0)
    die("HDF5 write");
  H5Dclose(d);
  H5Sclose(s);
  H5Fclose(f);
  int fd = open(path, O_RDONLY);
  if (fd < 0 || fsync(fd) != 0) die("fsync h5");
  close(fd);
  return max_over_ranks(now_ms() - t0);
}

static void time_save(ftl_ckpt *ck, int64_t step, double *stall, double *durable, int *cold) {
  *cold &= drop_caches();
  MPI_Barrier(comm);
  if (ftl_ckpt_save(ck, step)) die(ftl_ckpt_errmsg(ck));
  ftl_ckpt_stats st;
  if (ftl_ckpt_wait(ck, -1, &st)) die(st.errmsg);
  *stall = max_over_ranks(st.stall_ms);
  *durable = max_over_ranks(st.durable_ms);
}

static double time_restore(ftl_ckpt *ck, int *cold) {
  *cold &= drop_caches();
  MPI_Barrier(comm);
  ftl_ckpt_restore_info info;
  double t0 = now_ms();
  if (ftl_ckpt_restore(ck, &info)) die(info.errmsg);
  return max_over_ranks(now_ms() - t0);
}

/* Removes this rank's own L1 copies under root (shard-<rank>.h5 in step folders, never the partner
 * copies it keeps for the other rank): the memory of a lost host. */
static int own_rank;
static int remove_own_copy(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  char want[32];
  snprintf(want, sizeof want, "/shard-%05d.h5", own_rank);
  size_t n = strlen(path), k = strlen(want);
  if (flag == FTW_F && n > k && strcmp(path + n - k, want) == 0 && !strstr(path, "/partner/")) unlink(path);
  return 0;
}

/* 1 when every rank runs under another host name (run.sh's namespaces). */
static int distinct_hosts(void) {
  char mine[64] = "", *all = calloc((size_t)world, 64);
  if (!all) die("out of memory");
  gethostname(mine, sizeof mine - 1);
  MPI_Allgather(mine, 64, MPI_CHAR, all, 64, MPI_CHAR, comm);
  int ok = 1;
  for (int i = 0; i < world; i++)
    for (int j = 0; j < i; j++) ok &= strncmp(all + 64 * i, all + 64 * j, 64) != 0;
  free(all);
  return ok;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void run_size(ftl_ctx *ctx, const char *dir, size_t bytes, row *rows, int *cold_out) {
  /* rows: ROWS entries (the table's rows for this size). */
  char raw[PATH_MAX], h5[PATH_MAX], rundir[PATH_MAX];
  const int64_t row_elems = 1024;
  int64_t global_rows = (int64_t)(bytes / (size_t)(row_elems * 4)) * world;
  int64_t shape[2] = {global_rows, row_elems};
  char *state = malloc(bytes), *dst = malloc(bytes);
  if (!state || !dst) die("out of memory");
  for (size_t i = 0; i < bytes; i++)
    state[i] = (char)(i * 131 + (size_t)rank);
  memset(dst, 1, bytes);
  snprintf(raw, sizeof raw, "%s/raw-%d.bin", dir, rank);
  snprintf(h5, sizeof h5, "%s/sync-%d.h5", dir, rank);
  snprintf(rundir, sizeof rundir, "%s/run-%zu", dir, bytes >> 20);

  ftl_ckpt_options o;
  ftl_ckpt_options_init(&o);
  o.run_dir = rundir;
  o.keep = 2;
  ftl_ckpt *ck = NULL;
  if (ftl_ckpt_create(ctx, &o, &ck)) die("ftl_ckpt_create");
  if (ftl_ckpt_add_tensor(ck, "w", state, FTL_DTYPE_F32, 2, shape, FTL_CKPT_SPLIT, FTL_CKPT_HOST) ||
      ftl_ckpt_prepare(ck))
    die(ftl_ckpt_errmsg(ck));

  /* Warm-up of both sides: the files exist, the writer thread has run once. */
  double x, y;
  int cold = 1; /* every timed write and read starts from a dropped page cache (root only) */
  time_raw_write(raw, state, bytes, &cold);
  time_save(ck, 1, &x, &y, &cold);

  double cp[REPS], stall[REPS], wr[REPS], dur[REPS], rd[REPS], rs[REPS], hw[REPS];
  /* The order alternates between repetitions so neither side always follows the other. */
  for (int r = 0; r < reps; r++) {
    if (r % 2 == 0) {
      cp[r] = time_memcpy(dst, state, bytes);
      wr[r] = time_raw_write(raw, state, bytes, &cold);
      time_save(ck, r + 2, &stall[r], &dur[r], &cold);
    } else {
      time_save(ck, r + 2, &stall[r], &dur[r], &cold);
      wr[r] = time_raw_write(raw, state, bytes, &cold);
      cp[r] = time_memcpy(dst, state, bytes);
    }
  }
  for (int r = 0; r < reps; r++) {
    if (r % 2 == 0) {
      rd[r] = time_raw_read(raw, dst, bytes, &cold);
      rs[r] = time_restore(ck, &cold);
    } else {
      rs[r] = time_restore(ck, &cold);
      rd[r] = time_raw_read(raw, dst, bytes, &cold);
    }
  }
  for (int r = 0; r < reps; r++)
    hw[r] = time_h5_write(h5, state, bytes, row_elems);
  for (size_t i = 0; i < bytes; i += 4093)
    if (state[i] != (char)(i * 131 + (size_t)rank)) die("restore returned other bytes");
  ftl_ckpt_destroy(ck);

  /* The same state with L1 on: saves (their stall) and restores from the memory copies. */
  char l1root[PATH_MAX];
  snprintf(l1root, sizeof l1root, "/dev/shm/ftl-ckpt-bench-l1-%d", (int)getppid());
  if (rank == 0) mkdir(l1root, 0700);
  MPI_Barrier(comm);
  char rundir_l1[PATH_MAX + 8];
  snprintf(rundir_l1, sizeof rundir_l1, "%s-l1", rundir);
  o.run_dir = rundir_l1;
  o.l1_dir = l1root;
  if (ftl_ckpt_create(ctx, &o, &ck)) die("ftl_ckpt_create (L1)");
  if (ftl_ckpt_add_tensor(ck, "w", state, FTL_DTYPE_F32, 2, shape, FTL_CKPT_SPLIT, FTL_CKPT_HOST) ||
      ftl_ckpt_prepare(ck))
    die(ftl_ckpt_errmsg(ck));
  double stall_l1[REPS], rs_l1[REPS], cp2[REPS], rd2[REPS];
  evict_only = dir;
  time_save(ck, 1, &x, &y, &cold);
  for (int r = 0; r < reps; r++) {
    cp2[r] = time_memcpy(dst, state, bytes);
    time_save(ck, r + 2, &stall_l1[r], &y, &cold);
  }
  for (int r = 0; r < reps; r++) {
    if (r % 2 == 0) {
      rd2[r] = time_raw_read(raw, dst, bytes, &cold);
      rs_l1[r] = time_restore(ck, &cold);
    } else {
      rs_l1[r] = time_restore(ck, &cold);
      rd2[r] = time_raw_read(raw, dst, bytes, &cold);
    }
  }
  for (size_t i = 0; i < bytes; i += 4093)
    if (state[i] != (char)(i * 131 + (size_t)rank)) die("restore from L1 returned other bytes");
  evict_only = NULL;
  ftl_ckpt_destroy(ck);
  MPI_Barrier(comm);

  /* L2: the same with each shard also kept by the other rank's host; every restore after this
   * rank's own L1 copy is deleted, so its shard crosses the socket from the partner. */
  double rs_l2[REPS], rd3[REPS], stall_l2[REPS], cp3[REPS];
  int have_l2 = distinct_hosts();
  for (int r = 0; r < reps; r++) rs_l2[r] = rd3[r] = stall_l2[r] = cp3[r] = 0;
  if (have_l2) {
    char rundir_l2[PATH_MAX + 8];
    snprintf(rundir_l2, sizeof rundir_l2, "%s-l2", rundir);
    o.run_dir = rundir_l2;
    setenv("FTL_CKPT_L2", "1", 1);
    if (ftl_ckpt_create(ctx, &o, &ck)) die("ftl_ckpt_create (L2)");
    unsetenv("FTL_CKPT_L2");
    if (ftl_ckpt_add_tensor(ck, "w", state, FTL_DTYPE_F32, 2, shape, FTL_CKPT_SPLIT, FTL_CKPT_HOST) ||
        ftl_ckpt_prepare(ck))
      die(ftl_ckpt_errmsg(ck));
    time_save(ck, 1, &x, &y, &cold);
    own_rank = rank;
    for (int r = 0; r < reps; r++) {
      /* The stall with both memory levels on: the partner's copy is the writer's work, after it. */
      if (r % 2 == 0) {
        cp3[r] = time_memcpy(dst, state, bytes);
        time_save(ck, r + 2, &stall_l2[r], &y, &cold);
      } else {
        time_save(ck, r + 2, &stall_l2[r], &y, &cold);
        cp3[r] = time_memcpy(dst, state, bytes);
      }
      nftw(l1root, remove_own_copy, 16, FTW_PHYS);
      memset(state, 0, bytes);
      if (r % 2 == 0) {
        rd3[r] = time_raw_read(raw, dst, bytes, &cold);
        rs_l2[r] = time_restore(ck, &cold);
      } else {
        rs_l2[r] = time_restore(ck, &cold);
        rd3[r] = time_raw_read(raw, dst, bytes, &cold);
      }
      for (size_t i = 0; i < bytes; i += 4093)
        if (state[i] != (char)(i * 131 + (size_t)rank)) die("restore from L2 returned other bytes");
    }
    ftl_ckpt_destroy(ck);
    MPI_Barrier(comm);
  }
  if (rank == 0 && nftw(l1root, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
    fprintf(stderr, "ckpt_bench: could not remove %s\n", l1root);
  unlink(raw);
  unlink(h5);

  rows[0] = (row){"stall vs memcpy",   "<= 1.3",          median(cp, reps),
                  median(stall, reps), minimum(cp, reps), minimum(stall, reps)};
  rows[1] = (row){"durable vs write+fsync", "<= 1.1",          median(wr, reps),
                  median(dur, reps),        minimum(wr, reps), minimum(dur, reps)};
  rows[2] = (row){cold ? "restore vs read (cold)" : "restore vs read (warm)",
                  "<= 1.1",
                  median(rd, reps),
                  median(rs, reps),
                  minimum(rd, reps),
                  minimum(rs, reps)};
  rows[3] = (row){"stall vs sync HDF5+fsync", "-", median(hw, reps), median(stall, reps), minimum(hw, reps),
                  minimum(stall, reps)};
  rows[4] = (row){"stall, L1 on, vs memcpy", "<= 1.3", median(cp2, reps), median(stall_l1, reps), minimum(cp2, reps),
                  minimum(stall_l1, reps)};
  rows[5] = (row){cold ? "restore L1 vs read (cold)" : "restore L1 vs read (warm)", "<= 0.2", median(rd2, reps),
                  median(rs_l1, reps), minimum(rd2, reps), minimum(rs_l1, reps)};
  rows[6] = (row){cold ? "restore L2 vs read (cold)" : "restore L2 vs read (warm)", "<= 0.5", median(rd3, reps),
                  median(rs_l2, reps), minimum(rd3, reps), minimum(rs_l2, reps)};
  rows[7] = (row){"stall, L1+L2 on, vs memcpy", "<= 1.3", median(cp3, reps), median(stall_l2, reps),
                  minimum(cp3, reps), minimum(stall_l2, reps)};
  if (!have_l2) {
    rows[6].what = "restore L2: n/a (one host)";
    rows[7].what = "stall, L2: n/a (one host)";
  }
  *cold_out = cold;
  free(state);
  free(dst);
}

int main(int argc, char **argv) {
  ftl_ctx *ctx = NULL;
  if (ftl_init(&argc, &argv, &ctx)) {
    fprintf(stderr, "ftl_init failed: %s\n", ctx ? ftl_ctx_errmsg(ctx) : "");
    return 1;
  }
  comm = *(MPI_Comm *)ftl_ctx_mpi_comm(ctx);
  rank = ftl_ctx_info(ctx)->rank;
  world = ftl_ctx_info(ctx)->world_size;
  int a = 1;
  if (argc > a && strcmp(argv[a], "--smoke") == 0) {
    smoke = 1;
    reps = 3;
    a++;
  }
  const char *dir = argc > a ? argv[a] : "/tmp/ftl-ckpt-bench";
  size_t sizes[2] = {64u << 20, 512u << 20};
  int nsizes = 2;
  if (smoke) {
    nsizes = 1;
    sizes[0] = 1u << 20;
  }
  if (argc > a + 1) {
    int64_t mib = 0;
    if (ftl_parse_i64(argv[a + 1], 1, 1 << 20, &mib)) die("usage: ckpt_bench [--smoke] DIR [MiB]");
    nsizes = 1;
    sizes[0] = (size_t)mib << 20;
  }
  if (rank == 0 && ftl_mkdir_p(dir, NULL)) die("cannot create the bench folder");
  MPI_Barrier(comm);
  row rows[2][ROWS];
  int cold = 1;
  for (int s = 0; s < nsizes; s++)
    run_size(ctx, dir, sizes[s], rows[s], &cold);
  if (rank == 0) {
    printf("\nftl checkpoint bench: %d ranks, state pre-faulted, %d repetitions, max over ranks, ms\n", world, reps);
    printf("%-8s %-26s %10s %10s %7s | %10s %10s %7s | %6s\n", "state", "comparison", "base med", "ftl med", "ratio",
           "base min", "ftl min", "ratio", "goal");
    for (int s = 0; s < nsizes; s++) {
      char label[32];
      snprintf(label, sizeof label, "%zu MiB", sizes[s] >> 20);
      for (int i = 0; i < ROWS; i++) {
        const row *w = &rows[s][i];
        if (w->base <= 0) {
          printf("%-8s %-26s %10s %10s %7s | %10s %10s %7s | %6s\n", i == 0 ? label : "", w->what, "-", "-", "-", "-",
                 "-", "-", w->goal);
          continue;
        }
        printf("%-8s %-26s %10.1f %10.1f %6.2fx | %10.1f %10.1f %6.2fx | %6s\n", i == 0 ? label : "", w->what, w->base,
               w->ftl, w->ftl / w->base, w->base_min, w->ftl_min, w->ftl_min / w->base_min, w->goal);
      }
    }
  }
  ftl_finalize(ctx);
  return 0;
}
