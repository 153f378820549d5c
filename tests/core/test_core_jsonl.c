/* tests/core/test_core_jsonl.c: the JSON-lines appender and reader (core/jsonl.c): a round trip,
 * line iteration, concurrent appenders in several processes (fork) and several threads on one
 * handle leaving every line whole, repair of a last line torn by a writer that died, and the lock
 * deadline (FTL_ERR_TIMEOUT while another process holds the lock). */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/jsonl.h"
#include "ftl/core.h"
#include "ftl_test.h"

static char dir[] = "/tmp/ftl-jsonl-XXXXXX";

static void path_in(char *buf, size_t size, const char *name) {
  CHECK_OK(ftl_fmt(buf, size, "%s/%s", dir, name), "path");
}

static char *read_all(const char *path, size_t *size) {
  char *data = NULL;
  ftl_diag d = {{0}};
  CHECK_OK(core_jsonl_read(path, 64u << 20, 1000, &data, size, &d), d.msg);
  return data;
}

/* A record of about 1.5 KiB, so that interleaved writes would show. */
static json_t *big_record(int writer, int seq) {
  char pad[1500];
  memset(pad, 'a' + writer % 26, sizeof pad - 1);
  pad[sizeof pad - 1] = '\0';
  return json_pack("{s:i, s:i, s:i, s:s}", "version", FTL_RECORD_VERSION, "writer", writer, "seq", seq, "pad", pad);
}

typedef struct tally {
  int writers, per_writer, bad;
  int *seen; /* writers x per_writer */
} tally;

static ftl_err count_line(const char *line, size_t len, size_t line_no, void *ctx) {
  tally *t = ctx;
  (void)line_no;
  json_t *o = json_loadb(line, len, 0, NULL);
  json_t *w = o ? json_object_get(o, "writer") : NULL, *s = o ? json_object_get(o, "seq") : NULL;
  json_t *p = o ? json_object_get(o, "pad") : NULL;
  if (!json_is_integer(w) || !json_is_integer(s) || !json_is_string(p) || strlen(json_string_value(p)) != 1499) {
    t->bad++;
  } else {
    long long wi = json_integer_value(w), si = json_integer_value(s);
    if (wi < 0 || wi >= t->writers || si < 0 || si >= t->per_writer)
      t->bad++;
    else
      t->seen[wi * t->per_writer + si]++;
  }
  json_decref(o);
  return FTL_OK;
}

static void check_tally(const char *path, int writers, int per_writer) {
  size_t size = 0;
  char *data = read_all(path, &size);
  tally t = {writers, per_writer, 0, calloc((size_t)(writers * per_writer), sizeof(int))};
  CHECK(t.seen != NULL);
  CHECK(size > 0 && data[size - 1] == '\n');
  CHECK_OK(core_jsonl_each_line(data, size, count_line, &t), "each line");
  CHECK_INT_EQ(t.bad, 0);
  for (int i = 0; i < writers * per_writer; i++)
    CHECK_INT_EQ(t.seen[i], 1);
  free(t.seen);
  ftl_free(data);
}

static void test_round_trip(void) {
  char path[512];
  path_in(path, sizeof path, "one.jsonl");
  ftl_diag d = {{0}};
  const core_jsonl_opts opts = {.lock = true, .lock_timeout_ms = 1000, .fsync = true};
  json_t *rec = json_pack("{s:i, s:s}", "version", FTL_RECORD_VERSION, "text", "line\nbreak");
  CHECK_OK(core_jsonl_append(path, rec, &opts, &d), d.msg);
  CHECK_OK(core_jsonl_append(path, rec, NULL, &d), d.msg);
  json_decref(rec);
  size_t size = 0;
  char *data = read_all(path, &size);
  /* The newline inside the string is escaped: one record, one line. */
  CHECK_STR_EQ(data, "{\"version\":1,\"text\":\"line\\nbreak\"}\n{\"version\":1,\"text\":\"line\\nbreak\"}\n");
  CHECK_INT_EQ(size, strlen(data));
  ftl_free(data);
  char *none = NULL;
  path_in(path, sizeof path, "missing.jsonl");
  CHECK_INT_EQ(core_jsonl_read(path, 1024, 100, &none, &size, &d), FTL_ERR_NOTFOUND);
  CHECK(none == NULL);
  path_in(path, sizeof path, "no-such-folder/x.jsonl");
  json_t *empty = json_object();
  CHECK_INT_EQ(core_jsonl_append(path, empty, NULL, &d), FTL_ERR_IO);
  CHECK_STR_CONTAINS(d.msg, "no-such-folder");
  json_decref(empty);
}

typedef struct lines_seen {
  size_t count, last_no;
  size_t stop_at;
} lines_seen;

static ftl_err note_line(const char *line, size_t len, size_t line_no, void *ctx) {
  lines_seen *s = ctx;
  CHECK(len > 0 && line[len - 1] != '\n');
  s->count++;
  s->last_no = line_no;
  return line_no == s->stop_at ? FTL_ERR_CORRUPT : FTL_OK;
}

static void test_each_line(void) {
  const char *text = "a\n\nbb\nccc"; /* an empty line is skipped; the last needs no newline */
  lines_seen s = {0, 0, 0};
  CHECK_OK(core_jsonl_each_line(text, strlen(text), note_line, &s), "each");
  CHECK_INT_EQ(s.count, 3);
  CHECK_INT_EQ(s.last_no, 4);
  lines_seen stop = {0, 0, 3};
  CHECK_INT_EQ(core_jsonl_each_line(text, strlen(text), note_line, &stop), FTL_ERR_CORRUPT);
  CHECK_INT_EQ(stop.count, 2);
  CHECK_OK(core_jsonl_each_line(NULL, 0, note_line, &s), "empty");
}

/* Several processes append at once, with and without the lock: every line whole, none lost. */
static void test_processes(bool lock) {
  enum { WRITERS = 4, PER_WRITER = 150 };
  char path[512];
  path_in(path, sizeof path, lock ? "procs-locked.jsonl" : "procs.jsonl");
  pid_t pids[WRITERS];
  for (int w = 0; w < WRITERS; w++) {
    pids[w] = fork();
    CHECK(pids[w] >= 0);
    if (pids[w] == 0) {
      const core_jsonl_opts opts = {.lock = lock, .lock_timeout_ms = 10000, .fsync = false};
      core_jsonl *log = NULL;
      ftl_diag d = {{0}};
      int rc = core_jsonl_open(path, &opts, &log, &d) != FTL_OK;
      for (int i = 0; i < PER_WRITER && !rc; i++) {
        json_t *rec = big_record(w, i);
        rc = core_jsonl_write(log, rec, &d) != FTL_OK;
        json_decref(rec);
      }
      if (rc) fprintf(stderr, "writer %d: %s\n", w, d.msg);
      core_jsonl_close(log);
      _exit(rc);
    }
  }
  for (int w = 0; w < WRITERS; w++) {
    int st = 0;
    CHECK(waitpid(pids[w], &st, 0) == pids[w]);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  check_tally(path, WRITERS, PER_WRITER);
}

/* Several threads on one handle (the header allows it). */
enum { THREADS = 4, PER_THREAD = 100 };
typedef struct thread_arg {
  core_jsonl *log;
  int id, failed;
} thread_arg;

static void *thread_main(void *p) {
  thread_arg *a = p;
  ftl_diag d = {{0}};
  for (int i = 0; i < PER_THREAD; i++) {
    json_t *rec = big_record(a->id, i);
    if (core_jsonl_write(a->log, rec, &d) != FTL_OK) a->failed = 1;
    json_decref(rec);
  }
  return NULL;
}

static void test_threads(void) {
  char path[512];
  path_in(path, sizeof path, "threads.jsonl");
  const core_jsonl_opts opts = {.lock = true, .lock_timeout_ms = 10000, .fsync = false};
  core_jsonl *log = NULL;
  ftl_diag d = {{0}};
  CHECK_OK(core_jsonl_open(path, &opts, &log, &d), d.msg);
  pthread_t th[THREADS];
  thread_arg args[THREADS];
  for (int i = 0; i < THREADS; i++) {
    args[i] = (thread_arg){log, i, 0};
    CHECK(pthread_create(&th[i], NULL, thread_main, &args[i]) == 0);
  }
  for (int i = 0; i < THREADS; i++) {
    CHECK(pthread_join(th[i], NULL) == 0);
    CHECK_INT_EQ(args[i].failed, 0);
  }
  core_jsonl_close(log);
  check_tally(path, THREADS, PER_THREAD);
}

/* A writer died mid-line: the next locked append ends that line first, so the torn record is one
 * bad line and the new record is whole. */
static void test_torn_repair(void) {
  char path[512];
  path_in(path, sizeof path, "torn.jsonl");
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  CHECK(fd >= 0);
  const char *torn = "{\"version\":1,\"ok\":true}\n{\"version\":1,\"to";
  CHECK(write(fd, torn, strlen(torn)) == (ssize_t)strlen(torn));
  close(fd);
  ftl_diag d = {{0}};
  const core_jsonl_opts opts = {.lock = true, .lock_timeout_ms = 1000, .fsync = true};
  json_t *rec = json_pack("{s:i, s:b}", "version", FTL_RECORD_VERSION, "after", 1);
  CHECK_OK(core_jsonl_append(path, rec, &opts, &d), d.msg);
  CHECK_OK(core_jsonl_append(path, rec, &opts, &d), d.msg); /* a whole last line: no extra newline */
  json_decref(rec);
  size_t size = 0;
  char *data = read_all(path, &size);
  CHECK_STR_EQ(data, "{\"version\":1,\"ok\":true}\n{\"version\":1,\"to\n{\"version\":1,\"after\":true}\n"
                     "{\"version\":1,\"after\":true}\n");
  ftl_free(data);
}

/* Another process holds the exclusive lock: a locked append and a read give up at their deadline
 * with FTL_ERR_TIMEOUT, and succeed once the lock is released. */
static void test_lock_deadline(void) {
  char path[512];
  path_in(path, sizeof path, "locked.jsonl");
  ftl_diag d = {{0}};
  json_t *rec = json_pack("{s:i}", "version", FTL_RECORD_VERSION);
  CHECK_OK(core_jsonl_append(path, rec, NULL, &d), d.msg);
  int ready[2], release[2];
  CHECK(pipe(ready) == 0 && pipe(release) == 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    int fd = open(path, O_RDONLY);
    char c = 0;
    int rc = fd < 0 || flock(fd, LOCK_EX) != 0;
    if (write(ready[1], "x", 1) != 1) rc = 1;
    if (read(release[0], &c, 1) != 1) rc = 1; /* hold the lock until the parent says so */
    _exit(rc);
  }
  char c = 0;
  CHECK(read(ready[0], &c, 1) == 1);
  const core_jsonl_opts opts = {.lock = true, .lock_timeout_ms = 100, .fsync = false};
  int64_t t0 = ftl_clock_ms();
  CHECK_INT_EQ(core_jsonl_append(path, rec, &opts, &d), FTL_ERR_TIMEOUT);
  CHECK(ftl_clock_ms() - t0 >= 100);
  CHECK_STR_CONTAINS(d.msg, path);
  char *data = NULL;
  size_t size = 0;
  CHECK_INT_EQ(core_jsonl_read(path, 1024, 50, &data, &size, &d), FTL_ERR_TIMEOUT);
  CHECK(data == NULL);
  CHECK(write(release[1], "x", 1) == 1);
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_OK(core_jsonl_append(path, rec, &opts, &d), d.msg);
  json_decref(rec);
  data = read_all(path, &size);
  CHECK_STR_EQ(data, "{\"version\":1}\n{\"version\":1}\n");
  ftl_free(data);
  close(ready[0]);
  close(ready[1]);
  close(release[0]);
  close(release[1]);
}

int main(void) {
  CHECK(mkdtemp(dir) != NULL);
  test_round_trip();
  test_each_line();
  test_processes(false);
  test_processes(true);
  test_threads();
  test_torn_repair();
  test_lock_deadline();
  CHECK(ftl_test_rm_rf(dir) == 0);
  return 0;
}
