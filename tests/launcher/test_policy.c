/* tests/launcher/test_policy.c: the restart policy (launcher/policy.c) as a table: each row is a
 * history, the way the last attempt ended and the hostfile, and the decision it must give. The
 * sequences below the table drive several attempts in a row (back-off doubling and its reset,
 * crash loops judged by committed checkpoints). */
#include <signal.h>

#include "ftl_test.h"
#include "launcher/policy.h"

/* A failed attempt: rank 0 exited 1 on host h0 at `step`, retryable. */
static ln_attempt_result failed_at(int64_t last_step, int64_t committed_step) {
  ln_attempt_result r;
  memset(&r, 0, sizeof r);
  r.outcome = FTL_ATTEMPT_FAILED;
  r.kind = FTL_FAIL_EXIT;
  r.root_rank = 0;
  snprintf(r.root_host, sizeof r.root_host, "h0");
  r.exit_code = 1;
  r.retryable = 1;
  r.last_step = last_step;
  r.restored_step = -1;
  r.committed_step = committed_step;
  return r;
}

static ln_policy_config config(int ranks, int min_ranks, int max_restarts, int crash_loop, int hostfile) {
  return (ln_policy_config){.ranks = ranks, .min_ranks = min_ranks, .max_restarts = max_restarts,
                             .crash_loop = crash_loop, .backoff_ms = 100, .max_backoff_ms = 1000,
                             .have_hostfile = hostfile};
}

typedef enum { R_FAIL, R_EXEC, R_SUCCESS, R_PREEMPTED, R_SIGINT, R_SIGINT_CLEAN, R_SIGTERM, R_FAIL_STOPPING, R_RDZV,
               R_LAUNCH, R_NODE_H1, R_HANG_H1, R_HANG_UNBLAMED, R_FAIL_H1, R_NODE_ADDR } result_kind;

static ln_attempt_result make_result(result_kind k) {
  ln_attempt_result r = failed_at(10, -1);
  switch (k) {
    case R_FAIL: break;
    case R_EXEC: r.kind = FTL_FAIL_EXEC; r.retryable = 0; break;
    case R_SUCCESS: r.outcome = FTL_ATTEMPT_SUCCEEDED; r.kind = FTL_FAIL_NONE; break;
    case R_PREEMPTED: r.outcome = FTL_ATTEMPT_PREEMPTED; r.kind = FTL_FAIL_NONE; r.interrupt_signal = SIGTERM; break;
    case R_SIGINT: r.outcome = FTL_ATTEMPT_INTERRUPTED; r.interrupt_signal = SIGINT; break;
    /* Ctrl-C, the ranks stopped cleanly at their next step (a stop as a preemption's) */
    case R_SIGINT_CLEAN: r.outcome = FTL_ATTEMPT_PREEMPTED; r.kind = FTL_FAIL_NONE; r.interrupt_signal = SIGINT; break;
    case R_SIGTERM: r.outcome = FTL_ATTEMPT_INTERRUPTED; r.interrupt_signal = SIGHUP; break;
    case R_FAIL_STOPPING: r.interrupt_signal = SIGTERM; break;
    case R_RDZV: r.outcome = FTL_ATTEMPT_RDZV_FAILED; r.kind = FTL_FAIL_RDZV; break;
    case R_LAUNCH: r.outcome = FTL_ATTEMPT_LAUNCH_FAILED; r.kind = FTL_FAIL_EXEC; r.retryable = 0; break;
    case R_NODE_H1:
      r.kind = FTL_FAIL_NODE;
      r.root_rank = -1;
      snprintf(r.root_host, sizeof r.root_host, "h1");
      snprintf(r.bad_host, sizeof r.bad_host, "h1");
      break;
    case R_HANG_H1: r.kind = FTL_FAIL_HANG; snprintf(r.root_host, sizeof r.root_host, "h1"); break;
    case R_HANG_UNBLAMED: /* ranks on several hosts stopped at the same point */
      r.kind = FTL_FAIL_HANG;
      snprintf(r.root_host, sizeof r.root_host, "h1");
      r.root_host_unblamed = 1;
      break;
    case R_FAIL_H1: snprintf(r.root_host, sizeof r.root_host, "h1"); break;
    case R_NODE_ADDR: /* the hostfile names h1 by its address; its agents reported it */
      r.kind = FTL_FAIL_NODE;
      snprintf(r.bad_host, sizeof r.bad_host, "node-one");
      snprintf(r.bad_host_addrs, sizeof r.bad_host_addrs, "127.0.0.1 10.0.0.1");
      break;
  }
  return r;
}

/* ranks, min_ranks, max_restarts, crash_loop, hostfile; back-off 100 ms doubling up to 1 s */
#define CFG(r, m, mr, cl, hf)                                                                            \
  {.ranks = (r), .min_ranks = (m), .max_restarts = (mr), .crash_loop = (cl), .backoff_ms = 100,        \
   .max_backoff_ms = 1000, .have_hostfile = (hf)}

typedef struct row {
  const char *name;
  ln_policy_config cfg;
  int hosts;                 /* hostfile lines h0..h{n-1} with 2 slots each (h1 as 10.0.0.1 for R_NODE_ADDR) */
  int restarts;              /* history: restarts so far */
  const char *suspect;       /* history: a straggler's host */
  result_kind result;
  ln_policy_action action;
  ln_policy_stop why;
  int exit_code;             /* STOP */
  int64_t backoff_ms;        /* RESTART */
  int world;                 /* RESTART */
  const char *exclude;       /* "" none */
  int excluded;
} row;

static const row rows[] = {
    {"success", CFG(2, 0, 3, 3, 0), 0, 0, "", R_SUCCESS, FTL_POLICY_STOP, FTL_STOP_SUCCEEDED, 0, 0, 0, "", 0},
    {"a failure restarts", CFG(2, 0, 3, 3, 0), 0, 0, "", R_FAIL, FTL_POLICY_RESTART, FTL_STOP_NONE, 0, 100, 2, "", 0},
    {"budget exhausted", CFG(2, 0, 3, 9, 0), 0, 3, "", R_FAIL, FTL_POLICY_STOP, FTL_STOP_BUDGET, 1, 0, 0, "", 0},
    {"zero budget", CFG(2, 0, 0, 9, 0), 0, 0, "", R_FAIL, FTL_POLICY_STOP, FTL_STOP_BUDGET, 1, 0, 0, "", 0},
    {"rendezvous failures exit 4", CFG(2, 0, 1, 9, 0), 0, 1, "", R_RDZV, FTL_POLICY_STOP, FTL_STOP_BUDGET, 4, 0, 0, "", 0},
    {"program cannot start: no retry", CFG(2, 0, 3, 3, 0), 0, 0, "", R_EXEC, FTL_POLICY_STOP,
     FTL_STOP_NOT_RETRYABLE, 3, 0, 0, "", 0},
    {"launcher cannot start", CFG(2, 0, 3, 3, 0), 0, 0, "", R_LAUNCH, FTL_POLICY_STOP, FTL_STOP_CANNOT_LAUNCH, 3, 0,
     0, "", 0},
    {"preemption: no restart, 75", CFG(2, 0, 3, 3, 0), 0, 0, "", R_PREEMPTED, FTL_POLICY_STOP, FTL_STOP_PREEMPTED,
     75, 0, 0, "", 0},
    {"failure while stopping: 143", CFG(2, 0, 3, 3, 0), 0, 0, "", R_FAIL_STOPPING, FTL_POLICY_STOP,
     FTL_STOP_WHILE_STOPPING, 143, 0, 0, "", 0},
    {"SIGINT: 130", CFG(2, 0, 3, 3, 0), 0, 0, "", R_SIGINT, FTL_POLICY_STOP, FTL_STOP_INTERRUPTED, 130, 0, 0, "", 0},
    {"Ctrl-C, stopped cleanly: 130, not 75", CFG(2, 0, 3, 3, 0), 0, 0, "", R_SIGINT_CLEAN, FTL_POLICY_STOP,
     FTL_STOP_INTERRUPTED, 130, 0, 0, "", 0},
    {"SIGHUP: 143", CFG(2, 0, 3, 3, 0), 0, 0, "", R_SIGTERM, FTL_POLICY_STOP, FTL_STOP_INTERRUPTED, 143, 0, 0, "", 0},
    {"lost host left out, a spare takes its place", CFG(4, 0, 3, 3, 1), 3, 0, "", R_NODE_H1, FTL_POLICY_RESTART,
     FTL_STOP_NONE, 0, 100, 4, "h1", 1},
    {"lost host named by address", CFG(4, 0, 3, 3, 1), 3, 0, "", R_NODE_ADDR, FTL_POLICY_RESTART, FTL_STOP_NONE, 0,
     100, 4, "node-one", 1},
    {"hung rank's host left out", CFG(4, 0, 3, 3, 1), 3, 0, "", R_HANG_H1, FTL_POLICY_RESTART, FTL_STOP_NONE, 0, 100,
     4, "h1", 1},
    {"a hang no rank stands out in blames no host", CFG(4, 0, 3, 3, 1), 3, 0, "", R_HANG_UNBLAMED, FTL_POLICY_RESTART,
     FTL_STOP_NONE, 0, 100, 4, "", 0},
    {"suspect host whose rank failed left out", CFG(4, 0, 3, 3, 1), 3, 0, "h1", R_FAIL_H1, FTL_POLICY_RESTART,
     FTL_STOP_NONE, 0, 100, 4, "h1", 1},
    {"a plain failure blames no host", CFG(4, 0, 3, 3, 1), 3, 0, "", R_FAIL_H1, FTL_POLICY_RESTART, FTL_STOP_NONE, 0,
     100, 4, "", 0},
    {"no spare: shrink to min_ranks", CFG(4, 2, 3, 3, 1), 2, 0, "", R_NODE_H1, FTL_POLICY_RESTART, FTL_STOP_NONE, 0,
     100, 2, "h1", 1},
    {"no spare, no min_ranks: stop", CFG(4, 0, 3, 3, 1), 2, 0, "", R_NODE_H1, FTL_POLICY_STOP, FTL_STOP_NO_HOSTS, 1,
     0, 0, "h1", 1},
    {"below min_ranks: stop", CFG(4, 3, 3, 3, 1), 2, 0, "", R_NODE_H1, FTL_POLICY_STOP, FTL_STOP_NO_HOSTS, 1, 0, 0,
     "h1", 1},
    {"one host alone is kept", CFG(2, 0, 3, 3, 0), 0, 0, "", R_HANG_H1, FTL_POLICY_RESTART, FTL_STOP_NONE, 0, 100, 2,
     "h1", 0},
};

static void check_row(const row *t) {
  ln_policy_host hosts[4];
  memset(hosts, 0, sizeof hosts);
  for (int i = 0; i < t->hosts; i++) {
    char name[16];
    snprintf(name, sizeof name, "h%d", i);
    if (i == 1 && t->result == R_NODE_ADDR) snprintf(name, sizeof name, "10.0.0.1");
    snprintf(hosts[i].name, sizeof hosts[i].name, "%s", name);
    snprintf(hosts[i].line, sizeof hosts[i].line, "%s slots=2", name);
    hosts[i].slots = 2;
  }
  ln_policy_state h;
  ln_policy_state_init(&h, &t->cfg);
  h.restarts = t->restarts;
  snprintf(h.suspect, sizeof h.suspect, "%s", t->suspect);
  ln_attempt_result r = make_result(t->result);
  ln_policy_decision dec;
  ln_policy_decide(&t->cfg, &h, &r, hosts, (size_t)t->hosts, "job", "/runs/job", &dec);
  fprintf(stderr, "%-45s -> %s %s exit %d backoff %lld world %d exclude '%s': %s\n", t->name,
          dec.action == FTL_POLICY_RESTART ? "restart" : "stop", ln_policy_stop_name(dec.why), dec.exit_code,
          (long long)dec.backoff_ms, dec.world_size, dec.exclude_host, dec.message);
  CHECK_INT_EQ(dec.action, t->action);
  CHECK_INT_EQ(dec.why, t->why);
  if (t->action == FTL_POLICY_STOP) {
    CHECK_INT_EQ(dec.exit_code, t->exit_code);
    CHECK_INT_EQ(dec.next.restarts, t->restarts);
  } else {
    CHECK_INT_EQ(dec.backoff_ms, t->backoff_ms);
    CHECK_INT_EQ(dec.world_size, t->world);
    CHECK_INT_EQ(dec.next.restarts, t->restarts + 1);
    CHECK_STR_EQ(dec.exclude_host, t->exclude);
    CHECK_INT_EQ(dec.excluded, t->excluded);
    ln_policy_apply_hosts(&dec, &r, hosts, (size_t)t->hosts);
    int world = 0, slots = 0;
    CHECK_INT_EQ(ln_policy_world_size(&t->cfg, hosts, (size_t)t->hosts, &world, &slots), 0);
    CHECK_INT_EQ(world, t->world);
  }
  CHECK(dec.message[0] != '\0');
}

/* Runs results[0..n) as consecutive attempts; returns the index of the attempt that stopped the
 * job (n if none did) and the back-offs chosen on the way. */
static int run_sequence(const ln_policy_config *cfg, const ln_attempt_result *results, int n, int64_t *backoffs,
                        ln_policy_decision *last) {
  ln_policy_state h;
  ln_policy_state_init(&h, cfg);
  for (int i = 0; i < n; i++) {
    ln_policy_decide(cfg, &h, &results[i], NULL, 0, "job", "/runs/job", last);
    h = last->next;
    if (last->action == FTL_POLICY_STOP) return i;
    backoffs[i] = last->backoff_ms;
  }
  return n;
}

static void test_backoff_doubles_and_resets(void) {
  ln_policy_config cfg = config(2, 0, 20, 100, 0);
  /* no progress: 100, 200, 400, 800, then the cap (1000); progress at attempt 5 starts over */
  ln_attempt_result rs[8] = {failed_at(5, -1), failed_at(5, -1), failed_at(5, -1), failed_at(5, -1),
                              failed_at(5, -1), failed_at(9, -1), failed_at(9, -1), failed_at(9, -1)};
  int64_t b[8];
  ln_policy_decision dec;
  CHECK_INT_EQ(run_sequence(&cfg, rs, 8, b, &dec), 8);
  const int64_t want[8] = {100, 200, 400, 800, 1000, 100, 200, 400};
  for (int i = 0; i < 8; i++) CHECK_INT_EQ(b[i], want[i]);
}

static void test_crash_loop_by_commits(void) {
  ln_policy_config cfg = config(2, 0, 20, 3, 0);
  ln_policy_decision dec;
  int64_t b[4];
  /* The steps reached grow every time, but no new checkpoint is committed: nothing a restart keeps
   * got further, so this is a crash loop after 3 attempts. */
  ln_attempt_result loop[4] = {failed_at(100, 10), failed_at(150, 10), failed_at(200, 10), failed_at(250, 10)};
  CHECK_INT_EQ(run_sequence(&cfg, loop, 4, b, &dec), 2);
  CHECK_INT_EQ(dec.why, FTL_STOP_CRASH_LOOP);
  CHECK_INT_EQ(dec.exit_code, FTL_EXIT_JOB_FAILED);
  CHECK_STR_CONTAINS(dec.message, "crash loop: 3 attempts in a row failed");
  /* A new commit each time: independent failures, restarted (and the back-off starts over). */
  ln_attempt_result progress[4] = {failed_at(100, 10), failed_at(150, 20), failed_at(200, 30), failed_at(250, 40)};
  CHECK_INT_EQ(run_sequence(&cfg, progress, 4, b, &dec), 4);
  for (int i = 0; i < 4; i++) CHECK_INT_EQ(b[i], 100);
  /* A restored step counts as kept progress too. */
  ln_attempt_result restored[3] = {failed_at(100, -1), failed_at(100, -1), failed_at(100, -1)};
  restored[1].restored_step = 150;
  restored[2].restored_step = 150;
  CHECK_INT_EQ(run_sequence(&cfg, restored, 3, b, &dec), 3);
  /* Without checkpoints the steps reported are the measure. */
  ln_attempt_result steps[3] = {failed_at(7, -1), failed_at(7, -1), failed_at(7, -1)};
  CHECK_INT_EQ(run_sequence(&cfg, steps, 3, b, &dec), 2);
  CHECK_INT_EQ(dec.why, FTL_STOP_CRASH_LOOP);
}

static void test_backoff_signals(void) {
  CHECK_INT_EQ(ln_policy_backoff_signal_exit(SIGTERM), FTL_EXIT_PREEMPTED);
  CHECK_INT_EQ(ln_policy_backoff_signal_exit(SIGUSR1), FTL_EXIT_PREEMPTED);
  CHECK_INT_EQ(ln_policy_backoff_signal_exit(SIGINT), FTL_EXIT_SIGINT);
  CHECK_INT_EQ(ln_policy_backoff_signal_exit(SIGHUP), FTL_EXIT_SIGTERM);
}

static void test_host_matches(void) {
  CHECK(ln_policy_host_matches("h1", "h1", ""));
  CHECK(ln_policy_host_matches("10.0.0.1", "node", "127.0.0.1 10.0.0.1"));
  CHECK(!ln_policy_host_matches("10.0.0.1", "node", "10.0.0.10 10.0.0.11"));
  CHECK(!ln_policy_host_matches("h1", "h10", NULL));
}

/* n hostfile lines h0..h{n-1}, 2 slots each; h2 written by its address. */
static void hosts_of(ln_policy_host *h, int n) {
  memset(h, 0, (size_t)n * sizeof *h);
  for (int i = 0; i < n; i++) {
    if (i == 2) snprintf(h[i].name, sizeof h[i].name, "10.0.0.2");
    else snprintf(h[i].name, sizeof h[i].name, "h%d", i);
    h[i].slots = 2;
  }
}

static void add_degraded(ln_attempt_result *r, const char *host, const char *addrs) {
  int k = r->n_degraded++;
  snprintf(r->degraded[k].host, sizeof r->degraded[k].host, "%s", host);
  snprintf(r->degraded[k].addrs, sizeof r->degraded[k].addrs, "%s", addrs);
  snprintf(r->degraded[k].why, sizeof r->degraded[k].why, "GPU 0 (GPU-x) is degraded: thermal throttling");
}

/* Rule 5b: a degraded host is left out only while a spare keeps every rank. */
static void test_degraded_hosts(void) {
  ln_policy_config cfg = config(6, 0, 5, 3, 1);
  ln_policy_state st;
  ln_policy_state_init(&st, &cfg);
  ln_policy_host h[4];
  ln_policy_decision dec;
  /* 4 hosts × 2 slots for 6 ranks: h2 (by address) degraded, a rank crashed on h1: h2 is left out. */
  hosts_of(h, 4);
  ln_attempt_result r = make_result(R_FAIL_H1);
  add_degraded(&r, "node-two", "127.0.0.1 10.0.0.2");
  ln_policy_decide(&cfg, &st, &r, h, 4, "job", "run", &dec);
  CHECK_INT_EQ(dec.action, FTL_POLICY_RESTART);
  CHECK_INT_EQ(dec.world_size, 6);
  CHECK_INT_EQ(dec.n_degraded, 1);
  CHECK_INT_EQ(dec.degraded[0].left_out, 1);
  CHECK_INT_EQ(dec.slots, 6);
  ln_policy_apply_hosts(&dec, &r, h, 4);
  CHECK(h[2].bad && !h[0].bad && !h[1].bad && !h[3].bad);
  /* Now no spare: a second degraded host is kept (the gang keeps its 6 ranks). */
  ln_attempt_result r2 = make_result(R_FAIL);
  add_degraded(&r2, "h3", "");
  ln_policy_decide(&cfg, &dec.next, &r2, h, 4, "job", "run", &dec);
  CHECK_INT_EQ(dec.action, FTL_POLICY_RESTART);
  CHECK_INT_EQ(dec.n_degraded, 1);
  CHECK_INT_EQ(dec.degraded[0].left_out, 0);
  CHECK_INT_EQ(dec.world_size, 6);
  ln_policy_apply_hosts(&dec, &r2, h, 4);
  CHECK(!h[3].bad);
  /* A lost host and a degraded one with one spare: the lost host takes the spare, the degraded
   * host stays. */
  hosts_of(h, 4);
  ln_policy_state_init(&st, &cfg);
  ln_attempt_result r3 = make_result(R_NODE_H1);
  add_degraded(&r3, "h0", "");
  ln_policy_decide(&cfg, &st, &r3, h, 4, "job", "run", &dec);
  CHECK_STR_EQ(dec.exclude_host, "h1");
  CHECK_INT_EQ(dec.degraded[0].left_out, 0);
  CHECK_INT_EQ(dec.world_size, 6);
  /* The blamed host being the degraded one is not counted twice; a degraded host not in the plan is
   * ignored; without a hostfile nothing is left out. */
  ln_attempt_result r4 = make_result(R_NODE_H1);
  add_degraded(&r4, "h1", "");
  add_degraded(&r4, "elsewhere", "");
  ln_policy_decide(&cfg, &st, &r4, h, 4, "job", "run", &dec);
  CHECK_INT_EQ(dec.n_degraded, 0);
  CHECK_INT_EQ(dec.world_size, 6);
  ln_policy_config one = config(2, 0, 5, 3, 0);
  ln_attempt_result r5 = make_result(R_FAIL);
  add_degraded(&r5, "h0", "");
  ln_policy_decide(&one, &st, &r5, NULL, 0, "job", "run", &dec);
  CHECK_INT_EQ(dec.action, FTL_POLICY_RESTART);
  CHECK_INT_EQ(dec.n_degraded, 0);
  /* Success: nothing is decided about hosts. */
  ln_attempt_result ok = make_result(R_SUCCESS);
  add_degraded(&ok, "h0", "");
  ln_policy_decide(&cfg, &st, &ok, h, 4, "job", "run", &dec);
  CHECK_INT_EQ(dec.n_degraded, 0);
}

int main(void) {
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) check_row(&rows[i]);
  test_degraded_hosts();
  test_backoff_doubles_and_resets();
  test_crash_loop_by_commits();
  test_backoff_signals();
  test_host_matches();
  printf("ok\n");
  return 0;
}
