/* tests/launcher/test_detect.c: the failure detectors (launcher/detect.c) driven by a fake clock:
 * no process, socket or sleep. Each case sets what the launcher would know about the ranks at a
 * moment and asks the detectors what they find then. */
#include "ftl_test.h"
#include "launcher/detect.h"

static const ln_detect_limits limits = {.startup_ms = 600000, .step_ms = 5000, .checkpoint_ms = 20000,
                                         .node_ms = 10000};

/* n ranks, two per host (h0, h1, ...), every agent connected and heard at t = 0, every rank at
 * step 0 of its step section with progress at t = 0 (the clock starts at 1 s so 0 means "never"). */
static void gang(ln_rank_watch *r, int n) {
  static const char *const hosts[] = {"h0", "h1", "h2", "h3"};
  memset(r, 0, sizeof *r * (size_t)n);
  for (int i = 0; i < n; i++) {
    r[i].host = hosts[i / 2];
    r[i].has_agent = 1;
    r[i].alive_ms = 1000;
    r[i].progress_ms = 1000;
    r[i].last_step = 0;
    r[i].section = FTL_SECTION_STEP;
    r[i].state = 'S';
  }
}

static void test_lost_host(void) {
  ln_rank_watch r[4];
  ln_detection f;
  gang(r, 4);
  /* Every agent keeps reporting each second; h1's stop after t = 3 s. */
  for (int64_t t = 1000; t <= 30000; t += 1000) {
    for (int i = 0; i < 4; i++)
      if (i < 2 || t <= 3000) r[i].alive_ms = t;
    int found = ln_detect_lost_host(r, 4, &limits, t, &f);
    if (t < 3000 + limits.node_ms) {
      CHECK_INT_EQ(found, 0);
      continue;
    }
    CHECK_INT_EQ(found, 1);
    CHECK_INT_EQ(f.kind, FTL_FAIL_NODE);
    CHECK_INT_EQ(f.rank, -1);
    CHECK_STR_EQ(f.host, "h1");
    CHECK_STR_CONTAINS(f.message, "host h1 is lost: none of its 2 rank agents answered for 10.0 s");
    CHECK_INT_EQ(t, 13000);
    return;
  }
  FTL_TEST_FAIL_("the lost host was never found");
}

/* Agents report every second, each on its own phase: when one agent of a host is past node_s,
 * its neighbour's last report may be a moment later. Both silent: the host is lost, not the
 * first agent alone. */
static void test_agents_a_moment_apart(void) {
  ln_rank_watch r[4];
  ln_detection f;
  gang(r, 4);
  r[2].alive_ms = 2000;
  r[3].alive_ms = 2800; /* 0.8 s later */
  r[0].alive_ms = r[1].alive_ms = 11990;
  CHECK_INT_EQ(ln_detect_lost_host(r, 4, &limits, 11999, &f), 0);
  r[0].alive_ms = r[1].alive_ms = 12000;
  CHECK_INT_EQ(ln_detect_lost_host(r, 4, &limits, 12000, &f), 1);
  CHECK_INT_EQ(f.kind, FTL_FAIL_NODE);
  CHECK_STR_EQ(f.host, "h1");

  /* The neighbour still reports: the first agent alone is silent (stopped or starved). */
  r[3].alive_ms = 11500;
  CHECK_INT_EQ(ln_detect_lost_host(r, 4, &limits, 12000, &f), 1);
  CHECK_INT_EQ(f.kind, FTL_FAIL_AGENT_LOST);
  CHECK_INT_EQ(f.rank, 2);
  CHECK(f.host == NULL);
  CHECK_STR_CONTAINS(f.message, "has a silent agent for 10.0 s");

  /* An agent that exited or whose connection closed is not silent. */
  r[2].exited = 1;
  CHECK_INT_EQ(ln_detect_lost_host(r, 4, &limits, 12000, &f), 0);
}

static void test_hang_per_section(void) {
  ln_rank_watch r[4];
  ln_detection f;
  gang(r, 4);
  for (int i = 0; i < 4; i++) r[i].last_step = 7;
  /* Rank 1 is inside a checkpoint (20 s allowed), the others wait for it in a collective. */
  r[1].section = FTL_SECTION_CHECKPOINT;
  r[1].progress_ms = 3000;
  for (int i = 0; i < 4; i++)
    if (i != 1) r[i].progress_ms = 2000;
  CHECK_INT_EQ(ln_detect_hang(r, 4, &limits, 6999, &f), 0);
  CHECK_INT_EQ(ln_detect_hang(r, 4, &limits, 7000, &f), 1); /* rank 0: step section, 5 s */
  CHECK_INT_EQ(f.kind, FTL_FAIL_HANG);
  CHECK_INT_EQ(f.rank, 0); /* all at step 7: the first silent one, but its host is not to blame */
  CHECK_STR_CONTAINS(f.message, "hung: no progress for 5.0 s in its step section (timeout 5.0 s; last step 7; ranks "
                                "on other hosts stopped at the same point, so no host is blamed)");
  CHECK_INT_EQ(f.unpinned, 1);

  /* The rank furthest behind is the culprit of a hung collective. */
  r[3].last_step = 6;
  CHECK_INT_EQ(ln_detect_hang(r, 4, &limits, 7000, &f), 1);
  CHECK_INT_EQ(f.rank, 3);
  CHECK_INT_EQ(f.unpinned, 0);
  CHECK_STR_CONTAINS(f.message, "(timeout 5.0 s; last step 6)");
  /* Both ranks of host h1 behind: still h1's. */
  r[2].last_step = 6;
  CHECK_INT_EQ(ln_detect_hang(r, 4, &limits, 7000, &f), 1);
  CHECK_INT_EQ(f.rank, 2);
  CHECK_INT_EQ(f.unpinned, 0);
  /* One rank of h0 as far behind as h1's: nobody stands out. */
  r[0].last_step = 6;
  CHECK_INT_EQ(ln_detect_hang(r, 4, &limits, 7000, &f), 1);
  CHECK_INT_EQ(f.unpinned, 1);
  r[0].last_step = r[2].last_step = 7;

  /* Only the checkpoint section is silent: its longer timeout applies. */
  r[3].last_step = 7;
  for (int i = 0; i < 4; i++)
    if (i != 1) r[i].progress_ms = 22000;
  CHECK_INT_EQ(ln_detect_hang(r, 4, &limits, 22999, &f), 0);
  CHECK_INT_EQ(ln_detect_hang(r, 4, &limits, 23000, &f), 1);
  CHECK_STR_CONTAINS(f.message, "in its checkpoint section (timeout 20.0 s");

  /* Start-up: ranks that never made a step get the start-up timeout; ranks that never joined
   * (progress 0) are the rendezvous deadline's, not a hang. */
  gang(r, 2);
  r[0].section = r[1].section = FTL_SECTION_STARTUP;
  r[1].progress_ms = 0;
  CHECK_INT_EQ(ln_detect_hang(r, 2, &limits, 1000 + 599999, &f), 0);
  CHECK_INT_EQ(ln_detect_hang(r, 2, &limits, 1000 + 600000, &f), 1);
  CHECK_INT_EQ(f.rank, 0);
  CHECK_STR_CONTAINS(f.message, "start-up section, inside ftl_init (joined the rendezvous; MPI_Init");

  /* Start-up across hosts: every rank joined, none got through ftl_init (a hung MPI_Init): no host
   * to blame. One that did not while the others did is the one to blame. */
  gang(r, 4);
  for (int i = 0; i < 4; i++) {
    r[i].section = FTL_SECTION_STARTUP;
    r[i].last_step = -1;
  }
  CHECK_INT_EQ(ln_detect_hang(r, 4, &limits, 1000 + 600000, &f), 1);
  CHECK_INT_EQ(f.rank, 0);
  CHECK_INT_EQ(f.unpinned, 1);
  CHECK_STR_CONTAINS(f.message, "so no host is blamed");
  r[0].ready = r[1].ready = r[3].ready = 1;
  CHECK_INT_EQ(ln_detect_hang(r, 4, &limits, 1000 + 600000, &f), 1);
  CHECK_INT_EQ(f.rank, 2);
  CHECK_INT_EQ(f.unpinned, 0);
  CHECK_STR_CONTAINS(f.message, "inside ftl_init");
  r[2].ready = 1;
  CHECK_INT_EQ(ln_detect_hang(r, 4, &limits, 1000 + 600000, &f), 1);
  CHECK_STR_CONTAINS(f.message, "after ftl_init (restoring or in its first step)");
}

static void test_stopped_process(void) {
  ln_rank_watch r[4];
  ln_detection f;
  gang(r, 4);
  for (int i = 0; i < 4; i++) r[i].last_step = 10;
  r[0].last_step = 9;  /* behind, but running */
  r[2].state = 'T';    /* SIGSTOPped: the evidence wins over "furthest behind" */
  CHECK_INT_EQ(ln_detect_hang(r, 4, &limits, 1000 + 5000, &f), 1);
  CHECK_INT_EQ(f.rank, 2);
  CHECK_STR_CONTAINS(f.message, "its process is stopped");
  /* An exited rank is never named. */
  r[2].exited = 1;
  CHECK_INT_EQ(ln_detect_hang(r, 4, &limits, 1000 + 5000, &f), 1);
  CHECK_INT_EQ(f.rank, 0);
}

static void test_stragglers(void) {
  ln_rank_watch r[4];
  ln_straggler s[4];
  gang(r, 4);
  /* Nine reports each: not a full window yet. */
  for (int k = 0; k < FTL_STRAGGLER_WINDOW - 1; k++)
    for (int i = 0; i < 4; i++) ln_detect_note_compute(&r[i], i == 3 ? 30.0 : 10.0 + k % 2);
  CHECK_INT_EQ(ln_detect_stragglers(r, 4, FTL_STRAGGLER_RATIO, s, 4), 0);
  for (int i = 0; i < 4; i++) ln_detect_note_compute(&r[i], i == 3 ? 30.0 : 10.0);
  CHECK_INT_EQ(ln_detect_stragglers(r, 4, FTL_STRAGGLER_RATIO, s, 4), 1);
  CHECK_INT_EQ(s[0].rank, 3);
  CHECK(s[0].compute_ms == 30.0);
  CHECK(s[0].others_median_ms >= 10.0 && s[0].others_median_ms <= 11.0);
  r[3].straggler_reported = 1; /* reported once */
  CHECK_INT_EQ(ln_detect_stragglers(r, 4, FTL_STRAGGLER_RATIO, s, 4), 0);

  /* 1.5x but under the absolute floor (2 ms more): a fast step's noise, not a straggler. */
  gang(r, 4);
  for (int k = 0; k < FTL_STRAGGLER_WINDOW; k++)
    for (int i = 0; i < 4; i++) ln_detect_note_compute(&r[i], i == 3 ? 3.5 : 2.0);
  CHECK_INT_EQ(ln_detect_stragglers(r, 4, FTL_STRAGGLER_RATIO, s, 4), 0);
  /* Only the last window counts: a rank that was slow and recovered is not a straggler. */
  for (int k = 0; k < FTL_STRAGGLER_WINDOW; k++)
    for (int i = 0; i < 4; i++) ln_detect_note_compute(&r[i], 20.0);
  CHECK_INT_EQ(ln_detect_stragglers(r, 4, FTL_STRAGGLER_RATIO, s, 4), 0);
  /* One rank alone has nobody to be compared with. */
  CHECK_INT_EQ(ln_detect_stragglers(r, 1, FTL_STRAGGLER_RATIO, s, 4), 0);
}

/* The others' median by brute force: each rank's window median, then the others' sorted, as the
 * detector once did it (O(n^2 log n)); ln_detect_stragglers selects instead of sorting. */
static int cmp_d(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static double brute_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void test_stragglers_as_sorted(void) {
  enum { MAX = 41 };
  ln_rank_watch r[MAX];
  ln_straggler s[MAX], want[MAX];
  srand(11);
  static const double few[] = {1, 2, 5, 10};
  for (int round = 0; round < 20000; round++) {
    int n = 2 + rand() % (round % 2 ? MAX - 1 : 7), nwant = 0;
    memset(r, 0, sizeof r);
    for (int i = 0; i < n; i++) {
      /* few distinct values, many ties: a whole window of one value, or a mix */
      double one = few[rand() % 4];
      for (int k = 0; k < FTL_STRAGGLER_WINDOW; k++)
        ln_detect_note_compute(&r[i], round % 3 ? one : (double)(1 + rand() % 40) * (i % 7 == 3 ? 3.0 : 1.0));
    }
    for (int i = 0; i < n; i++) r[i].straggler_reported = rand() % 5 == 0;
    double med[MAX], others[MAX], w[FTL_STRAGGLER_WINDOW];
    for (int i = 0; i < n; i++) {
      memcpy(w, r[i].compute_ms, sizeof w);
      med[i] = brute_median(w, FTL_STRAGGLER_WINDOW);
    }
    for (int i = 0; i < n; i++) {
      int m = 0;
      for (int j = 0; j < n; j++)
        if (j != i) others[m++] = med[j];
      double typical = brute_median(others, m);
      if (r[i].straggler_reported || med[i] < FTL_STRAGGLER_RATIO * typical || med[i] - typical < FTL_STRAGGLER_MIN_MS)
        continue;
      want[nwant++] = (ln_straggler){.rank = i, .compute_ms = med[i], .others_median_ms = typical};
    }
    int got = ln_detect_stragglers(r, n, FTL_STRAGGLER_RATIO, s, MAX);
    CHECK_INT_EQ(got, nwant);
    for (int k = 0; k < got; k++) {
      CHECK_INT_EQ(s[k].rank, want[k].rank);
      CHECK(s[k].compute_ms == want[k].compute_ms && s[k].others_median_ms == want[k].others_median_ms);
    }
  }
}

/* Scanning only when a scan is due (ln_detect_*_due) finds what scanning every 100 ms finds, at the
 * same tick: reports arrive at random (alives, steps, section changes, a process stopped and
 * continued) until one host goes silent or one rank stops making progress. */
static void test_due_scans(void) {
  const ln_detect_limits lim = {.startup_ms = 4000, .step_ms = 2500, .checkpoint_ms = 6000, .node_ms = 3000};
  srand(5);
  for (int round = 0; round < 400; round++) {
    ln_rank_watch r[8];
    gang(r, 8);
    int dead_host = rand() % 4, hung_rank = rand() % 8, fault_at = 2000 + rand() % 20000, by_host = rand() % 2;
    int64_t host_due = 0, hang_due = 0;
    int found_every = 0, found_due = 0;
    ln_detection fe, fd;
    for (int64_t t = 1000; t < 60000 && !(found_every && found_due); t += 100) {
      for (int i = 0; i < 8; i++) {
        int silent = t >= fault_at && (by_host ? i / 2 == dead_host : i == hung_rank);
        if (!silent && rand() % 10 == 0) { /* an alive, now and then a stop or a continue */
          r[i].alive_ms = t;
          r[i].state = rand() % 40 == 0 ? 'T' : r[i].state == 'T' && rand() % 3 ? 'T' : 'S';
          if (r[i].state != 'T') r[i].stopped_ms = 0;
          else if (!r[i].stopped_ms) r[i].stopped_ms = t;
        }
        if ((!silent || by_host) && rand() % 4 == 0) { /* progress, in some section */
          r[i].progress_ms = t;
          r[i].section = rand() % 10 ? FTL_SECTION_STEP : rand() % 2 ? FTL_SECTION_CHECKPOINT : FTL_SECTION_STARTUP;
        }
      }
      if (!found_every) {
        found_every = ln_detect_lost_host(r, 8, &lim, t, &fe) ? 1 : ln_detect_hang(r, 8, &lim, t, &fe) ? 2 : 0;
        if (found_every) found_every = found_every * 1000000 + (int)(t / 100);
      }
      if (!found_due) {
        int64_t due = 0;
        if (t >= host_due) {
          if (ln_detect_lost_host_due(r, 8, &lim, t, &fd, &due)) found_due = 1;
          else host_due = due;
        }
        if (!found_due && t >= hang_due) {
          if (ln_detect_hang_due(r, 8, &lim, t, &fd, &due)) found_due = 2;
          else hang_due = due;
        }
        if (found_due) found_due = found_due * 1000000 + (int)(t / 100);
      }
    }
    CHECK(found_every != 0);
    CHECK_INT_EQ(found_due, found_every);
    CHECK_INT_EQ(fd.kind, fe.kind);
    CHECK_INT_EQ(fd.rank, fe.rank);
    CHECK_STR_EQ(fd.message, fe.message);
  }
}

/* The bound a report puts on the next scan: every rank in its checkpoint (6 s) when scanned, then
 * one reports a step (2.5 s) and goes silent. Its limit is closer than any the scan saw; the due
 * time still comes no later than the scan plus the shortest limit, so its hang is found on time. */
static void test_due_after_a_shorter_section(void) {
  const ln_detect_limits lim = {.startup_ms = 4000, .step_ms = 2500, .checkpoint_ms = 6000, .node_ms = 60000};
  ln_rank_watch r[4];
  ln_detection f;
  gang(r, 4);
  for (int i = 0; i < 4; i++) r[i].section = FTL_SECTION_CHECKPOINT;
  int64_t due = 0, found_at = -1;
  CHECK_INT_EQ(ln_detect_hang_due(r, 4, &lim, 1000, &f, &due), 0);
  CHECK(due <= 1000 + 2500);
  r[0].progress_ms = 1100;
  r[0].section = FTL_SECTION_STEP;
  for (int64_t t = 1100; t <= 10000 && found_at < 0; t += 100) {
    for (int i = 1; i < 4; i++) r[i].progress_ms = t;
    if (t >= due && ln_detect_hang_due(r, 4, &lim, t, &f, &due)) found_at = t;
  }
  CHECK_INT_EQ(found_at, 1100 + 2500);
  CHECK_INT_EQ(f.rank, 0);
}

/* The cadence: 250 ms and 1 s for small gangs, growing with the gang, within a quarter of the
 * shortest limit. */
static void test_cadence(void) {
  for (int relayed = 0; relayed < 2; relayed++) {
    ln_cadence c = ln_detect_cadence(64, &limits, relayed);
    CHECK(c.batch_ms == 250 && c.ping_ms == 1000 && c.missed_ms == FTL_DETECT_MISSED_MS && c.fence_ms == 10000);
    ln_detect_limits tight = {.startup_ms = 600, .step_ms = 400, .checkpoint_ms = 600, .node_ms = 600};
    c = ln_detect_cadence(64, &tight, relayed); /* never under the floors, the fence node_s */
    CHECK(c.batch_ms == 250 && c.ping_ms == 1000 && c.fence_ms == 600);
  }
  /* Direct agents: both periods within a quarter of the shortest limit (step_s 5 s here). */
  ln_cadence c = ln_detect_cadence(16384, &limits, 0);
  CHECK(c.batch_ms == 1000 && c.ping_ms == 1250 && c.missed_ms == FTL_DETECT_MISSED_MS + 750);
  c = ln_detect_cadence(131072, &limits, 0);
  CHECK(c.batch_ms == 1250 && c.ping_ms == 1250 && c.fence_ms == 10000);
  ln_detect_limits roomy = {.startup_ms = 600000, .step_ms = 180000, .checkpoint_ms = 420000, .node_ms = 600000};
  c = ln_detect_cadence(131072, &roomy, 0);
  CHECK(c.batch_ms == 8000 && c.ping_ms == 45000 && c.fence_ms == 600000);
  /* Relays: the batch as before; the ping N / 2,048 s up to 15 s, and a relay waits four of them
   * where that is longer than node_s. */
  c = ln_detect_cadence(16384, &limits, 1);
  CHECK(c.batch_ms == 1000 && c.ping_ms == 8000 && c.fence_ms == 32000);
  c = ln_detect_cadence(131072, &limits, 1);
  CHECK(c.batch_ms == 1250 && c.ping_ms == 15000 && c.fence_ms == 60000);
  c = ln_detect_cadence(131072, &roomy, 1); /* already past 15 s: unchanged */
  CHECK(c.batch_ms == 8000 && c.ping_ms == 45000 && c.fence_ms == 600000);
  c = ln_detect_cadence(4096, &limits, 1); /* 2 s, past step_s / 4; four pings still within node_s */
  CHECK(c.ping_ms == 2000 && c.fence_ms == 10000);
}

/* Where relays report an agent less often (the cadence's longer batch period), another agent of
 * the host counts as silent only after missed_ms: its last report may be a period old. */
static void test_missed_ms(void) {
  ln_rank_watch r[4];
  ln_detection f;
  gang(r, 4);
  r[2].alive_ms = 2000;
  r[3].alive_ms = 9500; /* 2.5 s before the scan: missed under the default, not under 4 s */
  r[0].alive_ms = r[1].alive_ms = 12000;
  CHECK_INT_EQ(ln_detect_lost_host(r, 4, &limits, 12000, &f), 1);
  CHECK_INT_EQ(f.kind, FTL_FAIL_NODE);
  ln_detect_limits slow = limits;
  slow.missed_ms = 4000;
  CHECK_INT_EQ(ln_detect_lost_host(r, 4, &slow, 12000, &f), 1);
  CHECK_INT_EQ(f.kind, FTL_FAIL_AGENT_LOST);
  CHECK_INT_EQ(f.rank, 2);
}

/* Host h's agents (ranks 2h, 2h+1) lose their connections at t_ns, having said they were asked
 * to stop (a teardown's SIGTERM) when spoke. */
static void vanish(ln_rank_watch *r, int h, int64_t t_ns, int spoke) {
  for (int i = 2 * h; i < 2 * h + 2; i++) {
    r[i].has_agent = 0;
    r[i].lost_ns = t_ns + (i - 2 * h) * 100;
    if (spoke) {
      r[i].stopping_ms = t_ns / 1000000 - 5;
      r[i].stop_signal = 15;
    }
  }
}

/* Agents whose connections closed without an exit report. When one host dies mpirun tears down
 * the others, and one wake-up of the launcher can read every host's closing connections in any
 * order: the lost host is the one whose agents said nothing, whichever order they were read in. */
/* A fresh gang of 6 in which hosts h1 and h2 vanish, h1 first (at 5 s, h2 at 9 s) when order is 0
 * and last when it is 1; h1's agents say they were torn down when torn is set. */
static void vanish_both(ln_rank_watch *r, int order, int torn) {
  gang(r, 6);
  vanish(r, 1, order == 0 ? 5000000000 : 9000000000, torn);
  vanish(r, 2, order == 0 ? 9000000000 : 5000000000, 0);
}

static void test_vanished(void) {
  ln_rank_watch r[6];
  ln_detection f;
  gang(r, 6);
  CHECK_INT_EQ(ln_detect_vanished(r, 6, -1, "h0", &f), 0);
  /* h2 dies; h1's agents are torn down and say so. Read with h1 first, then with h2 first. */
  for (int order = 0; order < 2; order++) {
    vanish_both(r, order, 1);
    CHECK_INT_EQ(ln_detect_vanished(r, 6, order == 0 ? 2 : 4, "h0", &f), 1);
    CHECK_INT_EQ(f.kind, FTL_FAIL_NODE);
    CHECK_INT_EQ(f.rank, -1);
    CHECK_STR_EQ(f.host, "h2");
    CHECK_STR_CONTAINS(f.message, "host h2 is lost: all 2 of its rank agents vanished without a word");
    /* Both in the same instant (one wake-up, equal clocks): the same answer. */
    vanish(r, 1, 7000000000, 1);
    vanish(r, 2, 7000000000, 0);
    CHECK_INT_EQ(ln_detect_vanished(r, 6, 2, "h0", &f), 1);
    CHECK_STR_EQ(f.host, "h2");
  }
  /* h1 torn down and gone, h2's agents not yet read as gone (still connected): nothing to blame
   * yet, since every agent that went said why. */
  gang(r, 6);
  vanish(r, 1, 5000000000, 1);
  CHECK_INT_EQ(ln_detect_vanished(r, 6, 2, "h0", &f), 0);
  /* Without the teardown's words, in either order: the evidence is ambiguous and no host is blamed
   * (a restart without exclusion is better than excluding a good host and keeping a bad one). */
  for (int order = 0; order < 2; order++) {
    vanish_both(r, order, 0);
    CHECK_INT_EQ(ln_detect_vanished(r, 6, order == 0 ? 2 : 4, "h0", &f), 1);
    CHECK_INT_EQ(f.kind, FTL_FAIL_AGENT_LOST);
    CHECK(f.host == NULL);
    CHECK_INT_EQ(f.rank, order == 0 ? 2 : 4); /* the first to go is named, as a lost agent */
    CHECK_STR_CONTAINS(f.message, "hosts h1 and h2");
    CHECK_STR_CONTAINS(f.message, "none is left out");
  }
  /* The launcher's own host is never the lost one: with h2 as the launcher's, h1 is the only
   * candidate left. */
  gang(r, 6);
  vanish(r, 1, 9000000000, 0);
  vanish(r, 2, 5000000000, 0);
  CHECK_INT_EQ(ln_detect_vanished(r, 6, 4, "h2", &f), 1);
  CHECK_INT_EQ(f.kind, FTL_FAIL_NODE);
  CHECK_STR_EQ(f.host, "h1");
  /* One agent of a host gone, its neighbour still there: that agent is lost, not the host. */
  gang(r, 6);
  r[3].has_agent = 0;
  r[3].lost_ns = 7000000000;
  CHECK_INT_EQ(ln_detect_vanished(r, 6, 3, "h0", &f), 1);
  CHECK_INT_EQ(f.kind, FTL_FAIL_AGENT_LOST);
  CHECK_INT_EQ(f.rank, 3);
  CHECK(f.host == NULL);
  /* An agent that reported its exit and then closed did not vanish. */
  r[2].has_agent = 0;
  r[2].exited = 1;
  CHECK_INT_EQ(ln_detect_vanished(r, 6, 3, "h0", &f), 1);
  CHECK_INT_EQ(f.kind, FTL_FAIL_AGENT_LOST);
  CHECK_INT_EQ(f.rank, 3);
  /* A silent agent beside torn-down ones elsewhere is the lost one, not the torn-down agents that
   * were read first. */
  gang(r, 6);
  vanish(r, 2, 3000000000, 1);
  r[1].has_agent = 0;
  r[1].lost_ns = 8000000000;
  CHECK_INT_EQ(ln_detect_vanished(r, 6, 4, "h0", &f), 1);
  CHECK_INT_EQ(f.kind, FTL_FAIL_AGENT_LOST);
  CHECK_INT_EQ(f.rank, 1);
}

/* An agent that finished its rank late (exit 0 reported) is never missing heartbeats, and its exit
 * report is its host answering: the host is not lost; a silent neighbour is one lost agent. */
static void test_finished_agent_not_lost(void) {
  ln_rank_watch r[4];
  ln_detection f;
  gang(r, 4);
  /* Everyone reports until t = 20 s; rank 2 (h1) finishes at 20.5 s, after the others stopped
   * reporting (they finished too); its connection then closes. */
  for (int i = 0; i < 4; i++) r[i].alive_ms = 20000;
  r[0].exited = r[1].exited = r[3].exited = 1;
  r[0].has_agent = r[1].has_agent = r[3].has_agent = 0;
  r[2].exited = 1;
  r[2].alive_ms = 20500; /* the exit report is its last word */
  for (int64_t t = 20000; t <= 60000; t += 500) CHECK_INT_EQ(ln_detect_lost_host(r, 4, &limits, t, &f), 0);
  /* Still connected after its exit report (the close not read yet): not silent either. */
  r[2].has_agent = 1;
  CHECK_INT_EQ(ln_detect_lost_host(r, 4, &limits, 60000, &f), 0);
  CHECK_INT_EQ(ln_detect_vanished(r, 4, -1, "h0", &f), 0);

  /* h1: rank 2 finished at 12 s (its exit report heard then); rank 3 silent since 2 s. The host
   * answered 0.5 s ago: rank 3's agent is lost, not the host. */
  gang(r, 4);
  for (int i = 0; i < 4; i++) r[i].alive_ms = 12000;
  r[2].exited = 1;
  r[2].has_agent = 0;
  r[3].alive_ms = 2000;
  CHECK_INT_EQ(ln_detect_lost_host(r, 4, &limits, 12500, &f), 1);
  CHECK_INT_EQ(f.kind, FTL_FAIL_AGENT_LOST);
  CHECK_INT_EQ(f.rank, 3);
  CHECK(f.host == NULL);
  /* Nothing heard from h1 for node_s since (rank 2's exit long ago): now the host is lost. */
  r[0].alive_ms = r[1].alive_ms = 12000 + limits.node_ms;
  CHECK_INT_EQ(ln_detect_lost_host(r, 4, &limits, 12000 + limits.node_ms, &f), 1);
  CHECK_INT_EQ(f.kind, FTL_FAIL_NODE);
  CHECK_STR_EQ(f.host, "h1");
}

/* A process its agent sees stopped (state T) is hung after FTL_DETECT_STOPPED_MS, whatever the
 * step timeout; a momentary stop is not. */
static void test_stopped_without_timeout(void) {
  static const ln_detect_limits slow = {.startup_ms = 600000, .step_ms = 180000, .checkpoint_ms = 600000,
                                         .node_ms = 30000};
  ln_rank_watch r[4];
  ln_detection f;
  gang(r, 4);
  r[1].state = 'T';
  r[1].stopped_ms = 2000;
  r[1].last_step = 10;
  CHECK_INT_EQ(ln_detect_hang(r, 4, &slow, 2000 + FTL_DETECT_STOPPED_MS - 1, &f), 0);
  CHECK_INT_EQ(ln_detect_hang(r, 4, &slow, 2000 + FTL_DETECT_STOPPED_MS, &f), 1);
  CHECK_INT_EQ(f.kind, FTL_FAIL_HANG);
  CHECK_INT_EQ(f.rank, 1);
  CHECK_STR_CONTAINS(f.message, "hung: its process is stopped (state T for 3.0 s");
  CHECK_STR_CONTAINS(f.message, "no progress for 4.0 s in its step section (last step 10");
  /* Running again: nothing. */
  r[1].state = 'S';
  r[1].stopped_ms = 0;
  CHECK_INT_EQ(ln_detect_hang(r, 4, &slow, 60000, &f), 0);
  /* Stopped before it ever reported progress (a plain program, or before ftl_init). */
  gang(r, 4);
  r[0].progress_ms = 0;
  r[0].state = 'T';
  r[0].stopped_ms = 5000;
  CHECK_INT_EQ(ln_detect_hang(r, 4, &slow, 9000, &f), 1);
  CHECK_INT_EQ(f.rank, 0);
  CHECK_STR_CONTAINS(f.message, "no progress reported yet");
}

/* Ranks on one host: nothing to exclude; the laxer ratio for ranks sharing too few cores. */
static void test_one_host_stragglers(void) {
  ln_rank_watch r[4];
  ln_straggler s[4];
  gang(r, 4);
  CHECK_INT_EQ(ln_detect_one_host(r, 4), 0);
  for (int i = 0; i < 4; i++) r[i].host = "vm";
  CHECK_INT_EQ(ln_detect_one_host(r, 4), 1);
  r[3].host = NULL; /* not known yet: does not make a second host */
  CHECK_INT_EQ(ln_detect_one_host(r, 4), 1);
  /* 4 ranks on 2 cores: one rank twice as slow for a window is time slicing, not a straggler. */
  for (int k = 0; k < FTL_STRAGGLER_WINDOW; k++)
    for (int i = 0; i < 4; i++) ln_detect_note_compute(&r[i], i == 3 ? 40.0 : 20.0);
  CHECK_INT_EQ(ln_detect_stragglers(r, 4, FTL_STRAGGLER_RATIO, s, 4), 1);
  CHECK_INT_EQ(ln_detect_stragglers(r, 4, FTL_STRAGGLER_RATIO_SHARED, s, 4), 0);
  for (int k = 0; k < FTL_STRAGGLER_WINDOW; k++)
    for (int i = 0; i < 4; i++) ln_detect_note_compute(&r[i], i == 3 ? 60.0 : 20.0);
  CHECK_INT_EQ(ln_detect_stragglers(r, 4, FTL_STRAGGLER_RATIO_SHARED, s, 4), 1);
}

/* A rank's local rank where it did not say its own: its place among its host's ranks in rank order
 * (which GPU's health is its, beside a straggler: docs/gpu.md). */
static void test_local_rank(void) {
  ln_rank_watch r[4];
  gang(r, 4); /* h0 h0 h1 h1 */
  CHECK_INT_EQ(ln_detect_local_rank(r, 4, 0), 0);
  CHECK_INT_EQ(ln_detect_local_rank(r, 4, 1), 1);
  CHECK_INT_EQ(ln_detect_local_rank(r, 4, 2), 0);
  CHECK_INT_EQ(ln_detect_local_rank(r, 4, 3), 1);
  r[0].host = NULL; /* not known yet: neither counted nor placed */
  CHECK_INT_EQ(ln_detect_local_rank(r, 4, 0), -1);
  CHECK_INT_EQ(ln_detect_local_rank(r, 4, 1), 0);
  r[2].host = "h0"; /* placed round-robin: h0 h1 h0 h1 */
  r[0].host = "h0";
  r[1].host = "h1";
  CHECK_INT_EQ(ln_detect_local_rank(r, 4, 2), 1);
  CHECK_INT_EQ(ln_detect_local_rank(r, 4, 3), 1);
  CHECK_INT_EQ(ln_detect_local_rank(r, 4, 4), -1);
}

int main(void) {
  test_local_rank();
  test_lost_host();
  test_finished_agent_not_lost();
  test_stopped_without_timeout();
  test_one_host_stragglers();
  test_agents_a_moment_apart();
  test_hang_per_section();
  test_stopped_process();
  test_stragglers();
  test_stragglers_as_sorted();
  test_due_scans();
  test_due_after_a_shorter_section();
  test_missed_ms();
  test_cadence();
  test_vanished();
  printf("ok\n");
  return 0;
}
