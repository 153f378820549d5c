/* tests/cadence/test_cadence_ledger.c: ledger lines in (the run's failures.jsonl and the fleet
 * ledger), the errors a bad line gets, loading into the estimate (skips, causes that do not count,
 * the same failure in two ledgers), appends (round trip, repair of a torn line), and concurrent
 * writers in separate processes leaving every line whole. */
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
      {"{\"version\":1,\"record\":\"holiday\"}", "neither \"failure\" nor \"exposure\"", FTL_ERR_CORRUPT},
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
  test_concurrent();
  cleanup();
  printf("ok\n");
  return 0;
}
