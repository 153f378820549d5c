/* tests/cadence/test_cadence_ledger.c: ledger lines in (the run's failures.jsonl and the fleet
 * ledger), the errors a bad line gets, loading into the estimate (skips, causes that do not count,
 * the same failure in two ledgers), the launcher's measured restarts (restart records: parsed,
 * appended, loaded into R from both ledgers, the newest window kept), appends (round trip, repair of
 * a torn line), and concurrent writers in separate processes leaving every line whole. */
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ftl/cadence.h"
#include "ftl/core.h"
#include "ftl_test.h"

static char dir[256];

static void path_in(char *buf, size_t size, const char *name) {
  CHECK_OK(ftl_fmt(buf, size, "%s/%s", dir, name), "path");
}

static void write_text(const char *path, const char *text) {
  ftl_diag d;
  CHECK_OK(ftl_write_file_atomic(path, text, strlen(text), &d), d.msg);
}

static ftl_err parse(const char *line, ftl_cadence_record *rec, ftl_diag *d) {
  return ftl_cadence_parse_record(line, strlen(line), rec, d);
}

static void test_parse(void) {
  ftl_cadence_record rec;
  ftl_diag d = {{0}};
  /* A launcher line (docs/formats/failures.md), with a field this version does not know. */
  CHECK_OK(parse("{\"version\":1,\"wall_us\":1700000000000000,\"job\":\"ft\",\"attempt\":2,\"world_size\":8,"
                 "\"cause\":\"node_lost\",\"rank\":-1,\"host\":\"h3\",\"step\":120,\"exit_code\":0,\"signal\":0,"
                 "\"detect_lag_ms\":1200.5,\"bad_host\":\"h3\",\"message\":\"lost\",\"future\":[1,2]}",
                 &rec, &d),
           d.msg);
  CHECK(rec.kind == FTL_CADENCE_REC_FAILURE && rec.cls == FTL_CADENCE_CAUSE_FAILURE);
  CHECK_STR_EQ(rec.cause, "node_lost");
  CHECK_STR_EQ(rec.job, "ft");
  CHECK_STR_EQ(rec.host, "h3");
  CHECK_INT_EQ(rec.attempt, 2);
  CHECK_INT_EQ(rec.step, 120);
  CHECK_INT_EQ(rec.world_size, 8);
  CHECK_INT_EQ(rec.wall_us, 1700000000000000LL);
  /* Fleet records. */
  CHECK_OK(parse("{\"version\":1,\"record\":\"exposure\",\"rank_hours\":12.5,\"world_size\":64}", &rec, &d), d.msg);
  CHECK(rec.kind == FTL_CADENCE_REC_EXPOSURE && rec.rank_hours == 12.5);
  CHECK_OK(parse("{\"version\":1,\"record\":\"exposure\",\"rank_hours\":3}", &rec, &d), d.msg);
  CHECK(rec.rank_hours == 3);
  CHECK_OK(parse("{\"version\":1,\"record\":\"failure\",\"cause\":\"preempted\",\"step\":4}", &rec, &d), d.msg);
  CHECK(rec.cls == FTL_CADENCE_CAUSE_NOT_FAILURE);
  /* A restart record, as the launcher writes it (docs/formats/failures.md); cause is optional. */
  CHECK_OK(parse("{\"version\":1,\"record\":\"restart\",\"wall_us\":1700000000000001,\"job\":\"ft\",\"host\":\"h1\","
                 "\"attempt\":3,\"world_size\":8,\"step\":140,\"restart_s\":4.25,\"cause\":\"signal\"}",
                 &rec, &d),
           d.msg);
  CHECK(rec.kind == FTL_CADENCE_REC_RESTART && rec.restart_s == 4.25);
  CHECK_STR_EQ(rec.cause, "signal");
  CHECK_INT_EQ(rec.attempt, 3);
  CHECK_INT_EQ(rec.step, 140);
  CHECK_OK(parse("{\"version\":1,\"record\":\"restart\",\"restart_s\":0}", &rec, &d), d.msg);
  CHECK(rec.kind == FTL_CADENCE_REC_RESTART && rec.restart_s == 0 && rec.cause[0] == '\0');
  /* Bad lines, each with a reason that names what is wrong. */
  const struct {
    const char *line, *why;
    ftl_err rc;
  } bad[] = {
      {"not json", "not JSON", FTL_ERR_CORRUPT},
      {"{\"version\":1,\"cause\":\"hang\"", "not JSON", FTL_ERR_CORRUPT},
      {"[1,2]", "not a JSON object", FTL_ERR_CORRUPT},
      {"{\"cause\":\"hang\"}", "\"version\" is missing", FTL_ERR_CORRUPT},
      {"{\"version\":\"1\",\"cause\":\"hang\"}", "\"version\" is not an integer", FTL_ERR_CORRUPT},
      {"{\"version\":2,\"cause\":\"hang\"}", "version 2 is not 1", FTL_ERR_UNSUPPORTED},
      {"{\"version\":1}", "\"cause\" is missing", FTL_ERR_CORRUPT},
      {"{\"version\":1,\"cause\":7}", "\"cause\" is not a string", FTL_ERR_CORRUPT},
      {"{\"version\":1,\"cause\":\"hang\",\"step\":1.5}", "\"step\" is not an integer", FTL_ERR_CORRUPT},
      {"{\"version\":1,\"cause\":\"hang\",\"world_size\":-3}", "world_size -3 is negative", FTL_ERR_CORRUPT},
      {"{\"version\":1,\"cause\":\"hang\",\"cause\":\"hang\"}", "not JSON", FTL_ERR_CORRUPT},
      {"{\"version\":1,\"record\":\"holiday\"}", "not \"failure\", \"exposure\", \"restart\" or \"gpu_health\"", FTL_ERR_CORRUPT},
      {"{\"version\":1,\"record\":\"restart\"}", "\"restart_s\" is missing", FTL_ERR_CORRUPT},
      {"{\"version\":1,\"record\":\"restart\",\"restart_s\":\"3\"}", "\"restart_s\" is not a number", FTL_ERR_CORRUPT},
      {"{\"version\":1,\"record\":\"restart\",\"restart_s\":-0.5}", "restart_s -0.5 is not in", FTL_ERR_CORRUPT},
      {"{\"version\":1,\"record\":\"restart\",\"restart_s\":1e12}", "restart_s 1e+12 is not in", FTL_ERR_CORRUPT},
      {"{\"version\":1,\"record\":\"restart\",\"restart_s\":2,\"cause\":5}", "\"cause\" is not a string",
       FTL_ERR_CORRUPT},
      {"{\"version\":1,\"record\":\"exposure\"}", "\"rank_hours\" is missing", FTL_ERR_CORRUPT},
      {"{\"version\":1,\"record\":\"exposure\",\"rank_hours\":\"2\"}", "\"rank_hours\" is not a number",
       FTL_ERR_CORRUPT},
      {"{\"version\":1,\"record\":\"exposure\",\"rank_hours\":-2}", "rank_hours -2 is not in", FTL_ERR_CORRUPT},
      {"{\"version\":1,\"record\":\"exposure\",\"rank_hours\":1e300}", "is not in", FTL_ERR_CORRUPT},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    d.msg[0] = '\0';
    ftl_err rc = parse(bad[i].line, &rec, &d);
    if (rc != bad[i].rc) FTL_TEST_FAIL_("line %s: rc %d, want %d (%s)", bad[i].line, (int)rc, (int)bad[i].rc, d.msg);
    CHECK_STR_CONTAINS(d.msg, bad[i].why);
  }
  /* The length is honoured: no NUL needed, nothing read past it. */
  const char two[] = "{\"version\":1,\"cause\":\"hang\"}GARBAGE";
  CHECK_OK(ftl_cadence_parse_record(two, strlen(two) - 7, &rec, &d), d.msg);
}

static ftl_cadence *make(void) {
  ftl_cadence_config cfg;
  ftl_cadence_config_init(&cfg);
  cfg.world_size = 16;
  cfg.step_s = 2;
  ftl_cadence *c = NULL;
  ftl_diag d;
  CHECK_OK(ftl_cadence_create(&cfg, &c, &d), d.msg);
  return c;
}

static void test_load(void) {
  char run[512], fleet[512];
  path_in(run, sizeof run, "failures.jsonl");
  path_in(fleet, sizeof fleet, "fleet.jsonl");
  write_text(
      run,
      "{\"version\":1,\"wall_us\":100,\"job\":\"ft\",\"attempt\":0,\"world_size\":16,\"cause\":\"hang\",\"step\":50}\n"
      "\n"
      "{\"version\":1,\"wall_us\":200,\"job\":\"ft\",\"attempt\":1,\"world_size\":16,\"cause\":\"signal\",\"step\":90}"
      "\n"
      "{\"version\":1,\"wall_us\":300,\"job\":\"ft\",\"attempt\":2,\"cause\":\"cannot_start\",\"step\":-1}\n"
      "this line is not json\n"
      "{\"version\":1,\"wall_us\":400,\"job\":\"ft\",\"attempt\":3,\"cause\":\"exit_code\",\"step\":-1}\n"
      "{\"version\":1,\"wall_us\":500,\"job\":\"ft\",\"attempt\":4,\"cause\":\"cosmic_ray\",\"step\":9}\n"
      "{\"version\":1,\"wall_us\":600,\"job\":\"ft\",\"attempt\":5,\"cause\":\"node_lost\",\"step\":200}\n"
      "{\"version\":1,\"wall_us\":700,\"job\":\"ft\",\"attempt\":6,\"cause\":\"hang\",\"st");
  ftl_cadence *c = make();
  ftl_cadence_load_stats st;
  ftl_diag d = {{0}};
  CHECK_OK(ftl_cadence_load_ledger(c, run, &st, &d), d.msg);
  CHECK_INT_EQ(st.lines, 8);
  CHECK_INT_EQ(st.failures, 3);     /* hang, signal, node_lost */
  CHECK_INT_EQ(st.not_failures, 3); /* cannot_start, exit before the first step, unknown cause */
  CHECK_INT_EQ(st.skipped, 2);      /* not JSON, and the torn last line */
  CHECK_INT_EQ(st.duplicates, 0);
  char want[600];
  CHECK_OK(ftl_fmt(want, sizeof want, "%s:5: not JSON", run), "fmt");
  CHECK_STR_CONTAINS(st.first_problem, want);
  ftl_cadence_decision dec;
  CHECK_OK(ftl_cadence_decide(c, &dec), "decide");
  CHECK(dec.failures == 3 && dec.rank_hours == 0);

  /* The fleet ledger repeats two of the run's failures (same job, attempt, wall_us) and adds
   * exposure and another job's failure: the repeats are not counted again. */
  write_text(fleet, "{\"version\":1,\"record\":\"exposure\",\"wall_us\":1,\"job\":\"old\",\"attempt\":0,\"world_size\":"
                    "64,\"rank_hours\":5000}\n"
                    "{\"version\":1,\"record\":\"failure\",\"wall_us\":2,\"job\":\"old\",\"attempt\":0,\"world_size\":"
                    "64,\"cause\":\"node_lost\",\"step\":7}\n"
                    "{\"version\":1,\"record\":\"failure\",\"wall_us\":100,\"job\":\"ft\",\"attempt\":0,\"cause\":"
                    "\"hang\",\"step\":50}\n"
                    "{\"version\":1,\"record\":\"failure\",\"wall_us\":600,\"job\":\"ft\",\"attempt\":5,\"cause\":"
                    "\"node_lost\",\"step\":200}\n"
                    "{\"version\":1,\"record\":\"exposure\",\"wall_us\":900,\"job\":\"ft\",\"attempt\":6,\"world_"
                    "size\":16,\"rank_hours\":96}\n"
                    "{\"version\":1,\"record\":\"failure\",\"cause\":\"preempted\",\"step\":4}\n");
  CHECK_OK(ftl_cadence_load_ledger(c, fleet, &st, &d), d.msg);
  CHECK_INT_EQ(st.failures, 1);
  CHECK_INT_EQ(st.duplicates, 2);
  CHECK_INT_EQ(st.not_failures, 1);
  CHECK_INT_EQ(st.skipped, 0);
  CHECK(st.rank_hours == 5096);
  CHECK_STR_EQ(st.first_problem, "");
  CHECK_OK(ftl_cadence_decide(c, &dec), "decide");
  CHECK(dec.failures == 4 && dec.rank_hours == 5096);
  /* λ̂ = (1 + 4)/(50,000 + 5096); M = 1/(λ̂·16). */
  CHECK(fabs(dec.rate - 5.0 / 55096.0) < 1e-15);
  CHECK_STR_CONTAINS(ftl_cadence_explain(c), "from 4 failures in 5096 rank-hours and the prior");

  /* From the environment, as a training program under the launcher does: both ledgers again,
   * so nothing new counts (every failure there has been seen); a missing one is no history. */
  setenv("FTL_RUN_DIR", dir, 1);
  setenv("FTL_FLEET_LEDGER", fleet, 1);
  ftl_cadence *c2 = make();
  ftl_cadence_load_stats st_run, st_fleet;
  CHECK_OK(ftl_cadence_load_from_env(c2, &st_run, &st_fleet, &d), d.msg);
  CHECK_INT_EQ(st_run.failures, 3);
  CHECK_INT_EQ(st_fleet.failures, 1);
  CHECK_INT_EQ(st_fleet.duplicates, 2);
  /* Loading again adds nothing: failures and exposure alike are recognised. */
  CHECK_OK(ftl_cadence_load_from_env(c2, NULL, &st_fleet, &d), d.msg);
  CHECK_INT_EQ(st_fleet.duplicates, 5);
  CHECK(st_fleet.rank_hours == 0);
  setenv("FTL_FLEET_LEDGER", "/nonexistent/fleet.jsonl", 1);
  setenv("FTL_RUN_DIR", "/nonexistent", 1);
  CHECK_OK(ftl_cadence_load_from_env(c2, &st_run, &st_fleet, &d), d.msg);
  CHECK_INT_EQ(st_run.lines + st_fleet.lines, 0);
  unsetenv("FTL_FLEET_LEDGER");
  unsetenv("FTL_RUN_DIR");
  CHECK_OK(ftl_cadence_load_from_env(c2, NULL, NULL, &d), d.msg);
  CHECK_OK(ftl_cadence_decide(c2, &dec), "decide");
  CHECK(dec.failures == 4 && dec.rank_hours == 5096);
  ftl_cadence_destroy(c2);

  /* Missing file, and a stats pointer that may be NULL. */
  char missing[512];
  path_in(missing, sizeof missing, "nope.jsonl");
  CHECK_INT_EQ(ftl_cadence_load_ledger(c, missing, NULL, &d), FTL_ERR_NOTFOUND);
  CHECK_STR_CONTAINS(d.msg, "nope.jsonl");
  /* Out of memory while reading is reported, not ignored. */
  ftl_alloc_fail_nth(1);
  CHECK_INT_EQ(ftl_cadence_load_ledger(c, fleet, NULL, &d), FTL_ERR_NOMEM);
  ftl_alloc_fail_nth(0);
  ftl_cadence_destroy(c);
}

static void test_append(void) {
  char fleet[512];
  path_in(fleet, sizeof fleet, "append.jsonl");
  ftl_cadence_record rec = {0};
  ftl_diag d = {{0}};
  rec.kind = FTL_CADENCE_REC_EXPOSURE;
  ftl_fmt(rec.job, sizeof rec.job, "job \"quoted\"");
  rec.attempt = 1;
  rec.world_size = 16;
  rec.rank_hours = 2.25;
  CHECK_OK(ftl_cadence_fleet_append(fleet, &rec, 1000, &d), d.msg);
  /* A crashed writer left half a line; the next append ends it rather than gluing onto it. */
  int fd = open(fleet, O_WRONLY | O_APPEND);
  CHECK(fd >= 0);
  CHECK(write(fd, "{\"version\":1,\"rec", 17) == 17);
  close(fd);
  memset(&rec, 0, sizeof rec);
  rec.kind = FTL_CADENCE_REC_FAILURE;
  ftl_fmt(rec.cause, sizeof rec.cause, "hang");
  ftl_fmt(rec.job, sizeof rec.job, "ft");
  rec.attempt = 3;
  rec.step = 77;
  rec.wall_us = 12345;
  CHECK_OK(ftl_cadence_fleet_append(fleet, &rec, 1000, &d), d.msg);
  ftl_cadence *c = make();
  ftl_cadence_load_stats st;
  CHECK_OK(ftl_cadence_load_ledger(c, fleet, &st, &d), d.msg);
  CHECK_INT_EQ(st.failures, 1);
  CHECK_INT_EQ(st.skipped, 1);
  CHECK(st.rank_hours == 2.25);
  CHECK_STR_CONTAINS(st.first_problem, ":2: not JSON");
  ftl_cadence_destroy(c);
  /* Bad records are refused before anything is written. */
  rec.cause[0] = '\0';
  CHECK_INT_EQ(ftl_cadence_fleet_append(fleet, &rec, 1000, &d), FTL_ERR_INVAL);
  rec.kind = FTL_CADENCE_REC_EXPOSURE;
  rec.rank_hours = -1;
  CHECK_INT_EQ(ftl_cadence_fleet_append(fleet, &rec, 1000, &d), FTL_ERR_INVAL);
  char nodir[512];
  path_in(nodir, sizeof nodir, "no/such/dir.jsonl");
  rec.rank_hours = 1;
  CHECK_INT_EQ(ftl_cadence_fleet_append(nodir, &rec, 1000, &d), FTL_ERR_IO);
  CHECK_STR_CONTAINS(d.msg, "no/such/dir.jsonl");
}

/* A restart record of JOB on a world of 4. */
static ftl_cadence_record restart_record(const char *job, int64_t wall_us, int64_t attempt, int64_t step,
                                         double restart_s) {
  ftl_cadence_record rec = {.kind = FTL_CADENCE_REC_RESTART,
                            .wall_us = wall_us,
                            .attempt = attempt,
                            .step = step,
                            .world_size = 4,
                            .restart_s = restart_s};
  ftl_fmt(rec.job, sizeof rec.job, "%s", job);
  return rec;
}

/* The launcher's restart records: appended with the one encoder to the run's ledger and the fleet's,
 * read back into R (the median of the newest window, each restart once however many ledgers repeat
 * it), and what a new run starts from when only the fleet ledger holds earlier runs' restarts. */
static void test_restarts(void) {
  char run[512], fleet[512];
  path_in(run, sizeof run, "restart-run.jsonl");
  path_in(fleet, sizeof fleet, "restart-fleet.jsonl");
  ftl_diag d = {{0}};
  /* An older run of another job in the fleet ledger only: slow restarts. */
  for (int i = 0; i < 3; i++) {
    ftl_cadence_record rec = restart_record("old", 1000 + i, i + 1, 10, 100 + i);
    CHECK_OK(ftl_cadence_fleet_append(fleet, &rec, 1000, &d), d.msg);
  }
  /* This run: a failure, then its restart, in both ledgers with the same wall_us (as run.c does). */
  ftl_cadence_record fail = {
      .kind = FTL_CADENCE_REC_FAILURE, .wall_us = 5000, .attempt = 0, .step = 30, .world_size = 4};
  ftl_fmt(fail.cause, sizeof fail.cause, "signal");
  ftl_fmt(fail.job, sizeof fail.job, "ft");
  CHECK_OK(ftl_cadence_fleet_append(run, &fail, 1000, &d), d.msg);
  CHECK_OK(ftl_cadence_fleet_append(fleet, &fail, 1000, &d), d.msg);
  for (int i = 0; i < 2; i++) {
    ftl_cadence_record rec = restart_record("ft", 6000 + i, i + 1, 20, 2.5 + i);
    ftl_fmt(rec.host, sizeof rec.host, "launcher-host");
    ftl_fmt(rec.cause, sizeof rec.cause, "signal");
    CHECK_OK(ftl_cadence_fleet_append(run, &rec, 1000, &d), d.msg);
    CHECK_OK(ftl_cadence_fleet_append(fleet, &rec, 1000, &d), d.msg);
  }
  /* The line as written: every field the format page names. */
  char *text = NULL;
  size_t len = 0;
  CHECK_OK(ftl_read_file(run, 1 << 20, &text, &len, &d), d.msg);
  CHECK_STR_CONTAINS(text, "\"record\":\"restart\"");
  CHECK_STR_CONTAINS(text, "\"restart_s\":2.5");
  CHECK_STR_CONTAINS(text, "\"cause\":\"signal\"");
  CHECK_STR_CONTAINS(text, "\"step\":20");
  ftl_free(text);
  ftl_cadence_record bad = {.kind = FTL_CADENCE_REC_RESTART, .restart_s = -1};
  CHECK_INT_EQ(ftl_cadence_fleet_append(run, &bad, 1000, &d), FTL_ERR_INVAL);
  bad.restart_s = NAN;
  CHECK_INT_EQ(ftl_cadence_fleet_append(run, &bad, 1000, &d), FTL_ERR_INVAL);

  /* Before any ledger: assumed. */
  ftl_cadence *c = make();
  double r = 0;
  int n = -1;
  CHECK_OK(ftl_cadence_restart_estimate(c, &r, &n), "estimate");
  CHECK(r == 60 && n == 0);
  CHECK_STR_CONTAINS(ftl_cadence_explain(c), "R = 60 s (assumed)");
  /* The run's ledger: two restarts (2.5 s, 3.5 s) and a failure; R is their median. */
  ftl_cadence_load_stats st;
  CHECK_OK(ftl_cadence_load_ledger(c, run, &st, &d), d.msg);
  CHECK_INT_EQ(st.restarts, 2);
  CHECK_INT_EQ(st.failures, 1);
  CHECK_OK(ftl_cadence_restart_estimate(c, &r, &n), "estimate");
  CHECK(n == 2 && fabs(r - 3.0) < 1e-12);
  ftl_cadence_decision dec;
  CHECK_OK(ftl_cadence_decide(c, &dec), "decide");
  CHECK(dec.restart_measured && fabs(dec.restart_s - 3.0) < 1e-12);
  CHECK_STR_CONTAINS(ftl_cadence_explain(c), "R = 3 s (measured)");
  /* The fleet ledger repeats them (not counted twice) and adds the old job's three. */
  CHECK_OK(ftl_cadence_load_ledger(c, fleet, &st, &d), d.msg);
  CHECK_INT_EQ(st.restarts, 3);
  CHECK_INT_EQ(st.duplicates, 3); /* the failure and the two restarts */
  CHECK_OK(ftl_cadence_restart_estimate(c, &r, &n), "estimate");
  CHECK(n == 5 && r == 100); /* {2.5, 3.5, 100, 101, 102} */
  ftl_cadence_destroy(c);

  /* A window of 3 keeps the newest three by wall_us, whatever order the ledgers come in: loading
   * the fleet first (old job's restarts, then this run's) or the run's first gives the same R. */
  ftl_cadence_config cfg;
  ftl_cadence_config_init(&cfg);
  cfg.step_s = 1;
  cfg.window = 3;
  const char *orders[2][2] = {{fleet, run}, {run, fleet}};
  for (int o = 0; o < 2; o++) {
    CHECK_OK(ftl_cadence_create(&cfg, &c, &d), d.msg);
    CHECK_OK(ftl_cadence_load_ledger(c, orders[o][0], NULL, &d), d.msg);
    CHECK_OK(ftl_cadence_load_ledger(c, orders[o][1], NULL, &d), d.msg);
    CHECK_OK(ftl_cadence_restart_estimate(c, &r, &n), "estimate");
    CHECK(n == 3 && r == 3.5); /* {102 (wall_us 1002), 2.5 (6000), 3.5 (6001)} */
    /* A restart observed in-process is newer than any ledger's: it pushes out the oldest (102). */
    CHECK_OK(ftl_cadence_observe_restart(c, 0, 1.0), "observe");
    CHECK_OK(ftl_cadence_restart_estimate(c, &r, &n), "estimate");
    CHECK(n == 3 && r == 2.5); /* {2.5, 3.5, 1.0} */
    ftl_cadence_destroy(c);
  }

  /* A new run: its own ledger is empty (no FTL_RUN_DIR ledger yet); the fleet's restarts set R. */
  setenv("FTL_FLEET_LEDGER", fleet, 1);
  setenv("FTL_RUN_DIR", "/nonexistent", 1);
  c = make();
  ftl_cadence_load_stats st_run, st_fleet;
  CHECK_OK(ftl_cadence_load_from_env(c, &st_run, &st_fleet, &d), d.msg);
  CHECK_INT_EQ(st_fleet.restarts, 5);
  CHECK_STR_CONTAINS(ftl_cadence_explain(c), "R = 1.67 min (measured)");
  unsetenv("FTL_FLEET_LEDGER");
  unsetenv("FTL_RUN_DIR");
  ftl_cadence_destroy(c);
  unlink(run);
  unlink(fleet);
}

/* Several processes append at once; every line must come out whole and every record counted. */
static void test_concurrent(void) {
  enum { WRITERS = 8, EACH = 150 };
  char fleet[512];
  path_in(fleet, sizeof fleet, "concurrent.jsonl");
  pid_t pids[WRITERS];
  for (int w = 0; w < WRITERS; w++) {
    pids[w] = fork();
    CHECK(pids[w] >= 0);
    if (pids[w] == 0) {
      for (int i = 0; i < EACH; i++) {
        ftl_cadence_record rec = {0};
        ftl_diag d;
        /* Failures and exposure alternate; a long job name makes lines of a few hundred bytes. */
        ftl_fmt(rec.job, sizeof rec.job, "writer-%d-%0100d", w, i);
        ftl_fmt(rec.host, sizeof rec.host, "host%d", w);
        rec.attempt = i;
        rec.wall_us = 1000000 * (int64_t)w + i + 1;
        if (i % 2) {
          rec.kind = FTL_CADENCE_REC_FAILURE;
          ftl_fmt(rec.cause, sizeof rec.cause, "node_lost");
          rec.step = i;
        } else {
          rec.kind = FTL_CADENCE_REC_EXPOSURE;
          rec.rank_hours = 0.5;
        }
        if (ftl_cadence_fleet_append(fleet, &rec, 30000, &d)) {
          fprintf(stderr, "writer %d: %s\n", w, d.msg);
          _exit(1);
        }
      }
      _exit(0);
    }
  }
  for (int w = 0; w < WRITERS; w++) {
    int status;
    CHECK(waitpid(pids[w], &status, 0) == pids[w]);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  ftl_cadence *c = make();
  ftl_cadence_load_stats st;
  ftl_diag d = {{0}};
  CHECK_OK(ftl_cadence_load_ledger(c, fleet, &st, &d), d.msg);
  CHECK_INT_EQ(st.lines, WRITERS * EACH);
  CHECK_INT_EQ(st.skipped, 0);
  CHECK_INT_EQ(st.duplicates, 0);
  CHECK_INT_EQ(st.failures, WRITERS * EACH / 2);
  CHECK(st.rank_hours == 0.5 * WRITERS * EACH / 2);
  ftl_cadence_destroy(c);
  printf("%d writers × %d appends: %lld whole lines\n", WRITERS, EACH, (long long)st.lines);
}

static void cleanup(void) {
  const char *names[] = {"failures.jsonl", "fleet.jsonl", "append.jsonl", "concurrent.jsonl"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char p[512];
    path_in(p, sizeof p, names[i]);
    unlink(p);
  }
  rmdir(dir);
}

int main(void) {
  ftl_log_set_level(FTL_LOG_ERROR);
  const char *tmp = getenv("TMPDIR");
  CHECK_OK(ftl_fmt(dir, sizeof dir, "%s/ftl-test-cadence-XXXXXX", tmp && *tmp ? tmp : "/tmp"), "fmt");
  CHECK(mkdtemp(dir) != NULL);
  test_parse();
  test_load();
  test_append();
  test_restarts();
  test_concurrent();
  cleanup();
  printf("ok\n");
  return 0;
}
