/* tests/eval/test_snapshot.c: the data snapshot (pipeline/snapshot.h): files and folders hashed,
 * the record's digest, and verification naming the file that changed, was added or was removed;
 * a gate edited with the record's digest recomputed (gate_sha256 no longer matches); an input that
 * vanished (never FTL_ERR_NOTFOUND, which a relaunch reads as "no snapshot"); a FIFO or a link to
 * /dev/zero in an input's place (refused, not waited on or hashed forever); an input given as a
 * symbolic link, retargeted or removed after submission. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ftl/core.h"
#include "ftl_test.h"
#include "pipeline/sha256.h"
#include "pipeline/snapshot.h"

static char root[PATH_MAX];

static void put(const char *rel, const char *text) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  fputs(text, f);
  fclose(f);
}

static const char *verify_err(const json_t *snap) {
  static ftl_diag d;
  memset(&d, 0, sizeof d);
  ftl_err rc = pl_snapshot_verify(snap, &d);
  if (rc == FTL_OK) FTL_TEST_FAIL_("verification passed, expected a refusal");
  return d.msg;
}

int main(void) {
  snprintf(root, sizeof root, "/tmp/ftl-snapshot-XXXXXX");
  CHECK(mkdtemp(root));
  char dir[PATH_MAX + 16], file[PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s/data", root);
  snprintf(file, sizeof file, "%s/base.h5", root);
  CHECK(mkdir(dir, 0755) == 0);
  put("data/b.txt", "bbb\n");
  put("data/a.txt", "aaa\n");
  char sub[PATH_MAX + 32];
  snprintf(sub, sizeof sub, "%s/sub", dir);
  CHECK(mkdir(sub, 0755) == 0);
  put("data/sub/c.txt", "ccc\n");
  put("base.h5", "weights");

  pl_snapshot_input in[] = {{"data", dir}, {"base", file}};
  json_t *gate = json_pack("{s:{s:s}, s:n}", "eval", "metric", "m", "registry");
  json_t *snap = NULL;
  ftl_diag d = {{0}};
  CHECK_OK(pl_snapshot_build(in, 2, "job", "00112233445566778899aabbccddeeff", gate, &snap, &d), d.msg);
  CHECK_OK(pl_snapshot_verify(snap, &d), d.msg);
  /* sha256sum of "weights" */
  CHECK_STR_EQ(pl_snapshot_input_sha256(snap, "base"),
               "9a129038d9a00aed0cf6a7ea059ca50a813449061ab87848cf1a13eafdf33b2c");
  const json_t *folder = pl_snapshot_find_input(snap, "data");
  CHECK_STR_EQ(json_string_value(json_object_get(folder, "kind")), "folder");
  const json_t *files = json_object_get(folder, "files");
  CHECK_INT_EQ(json_array_size(files), 3);
  CHECK_STR_EQ(json_string_value(json_object_get(json_array_get(files, 0), "path")), "a.txt");
  CHECK_STR_EQ(json_string_value(json_object_get(json_array_get(files, 2), "path")), "sub/c.txt");
  CHECK_INT_EQ(json_integer_value(json_object_get(folder, "size")), 12);
  CHECK(pl_snapshot_gate(snap) != NULL);
  CHECK_INT_EQ(strlen(pl_snapshot_gate_sha256(snap)), 64);

  /* Written, read back, digest checked. */
  CHECK_OK(pl_snapshot_write(root, snap, &d), d.msg);
  json_t *back = NULL;
  CHECK_OK(pl_snapshot_load(root, &back, &d), d.msg);
  CHECK(json_equal(snap, back));
  json_decref(back);
  CHECK_OK(pl_snapshot_verify_run_dir(root, &d), d.msg);
  json_t *tampered = json_deep_copy(snap);
  json_object_set_new(json_object_get(tampered, "gate"), "eval", json_pack("{s:s}", "metric", "loss"));
  char *text = json_dumps(tampered, 0);
  CHECK_INT_EQ(pl_snapshot_parse(text, strlen(text), &back, &d), FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, "digest does not match");
  free(text);
  json_decref(tampered);

  /* The gate rewritten (threshold 0) and the record's digest recomputed: gate_sha256 still names
   * the locked gate, so the edit is refused. */
  {
    json_t *t = json_deep_copy(snap);
    json_object_set_new(json_object_get(json_object_get(t, "gate"), "eval"), "threshold", json_real(0));
    json_object_del(t, "digest");
    char *canon = pl_snapshot_canonical(t), hex[65];
    CHECK_OK(pl_sha256_hex(canon, strlen(canon), hex), "sha256");
    free(canon);
    json_object_set_new(t, "digest", json_string(hex));
    char *tt = json_dumps(t, 0);
    CHECK_INT_EQ(pl_snapshot_parse(tt, strlen(tt), &back, &d), FTL_ERR_CORRUPT);
    CHECK_STR_CONTAINS(d.msg, "'gate_sha256' is not the SHA-256 of its 'gate'");
    free(tt);
    json_decref(t);
  }

  /* An input given through a symbolic link: the link is recorded; retargeted, removed, pointed at
   * /dev/zero, or its file replaced by a FIFO, each is refused naming the input. */
  {
    char real1[PATH_MAX + 16], real2[PATH_MAX + 16], link[PATH_MAX + 16];
    snprintf(real1, sizeof real1, "%s/real1.txt", root);
    snprintf(real2, sizeof real2, "%s/real2.txt", root);
    snprintf(link, sizeof link, "%s/held.txt", root);
    put("real1.txt", "one\n");
    put("real2.txt", "two\n");
    CHECK(symlink("real1.txt", link) == 0);
    pl_snapshot_input lin[] = {{"held", link}};
    json_t *ls = NULL;
    CHECK_OK(pl_snapshot_build(lin, 1, "job", "", NULL, &ls, &d), d.msg);
    const json_t *e = pl_snapshot_find_input(ls, "held");
    CHECK_STR_EQ(json_string_value(json_object_get(e, "link")), link);
    CHECK_STR_EQ(json_string_value(json_object_get(e, "path")), real1);
    CHECK_OK(pl_snapshot_verify(ls, &d), d.msg);
    unlink(link);
    CHECK(symlink("real2.txt", link) == 0);
    CHECK_INT_EQ(pl_snapshot_verify(ls, &d), FTL_ERR_CORRUPT);
    CHECK_STR_CONTAINS(d.msg, "input 'held' changed after submission");
    CHECK_STR_CONTAINS(d.msg, "the link resolves to");
    unlink(link);
    CHECK_INT_EQ(pl_snapshot_verify(ls, &d), FTL_ERR_CORRUPT);
    CHECK_STR_CONTAINS(d.msg, "input 'held' changed after submission");
    CHECK(symlink("/dev/zero", link) == 0);
    CHECK_INT_EQ(pl_snapshot_verify(ls, &d), FTL_ERR_CORRUPT);
    CHECK_STR_CONTAINS(d.msg, "input 'held'");
    unlink(link);
    CHECK(symlink("real1.txt", link) == 0);
    CHECK_OK(pl_snapshot_verify(ls, &d), d.msg);
    /* The resolved file itself replaced by a FIFO or a link to /dev/zero. */
    unlink(real1);
    CHECK(mkfifo(real1, 0600) == 0);
    CHECK_INT_EQ(pl_snapshot_verify(ls, &d), FTL_ERR_CORRUPT);
    CHECK_STR_CONTAINS(d.msg, "not a regular file");
    unlink(real1);
    CHECK(symlink("/dev/zero", real1) == 0);
    CHECK_INT_EQ(pl_snapshot_verify(ls, &d), FTL_ERR_CORRUPT);
    CHECK_STR_CONTAINS(d.msg, "input 'held'");
    unlink(real1);
    unlink(link);
    unlink(real2);
    /* A FIFO or /dev/zero given as an input at submission: refused, not hashed. */
    CHECK(mkfifo(real1, 0600) == 0);
    pl_snapshot_input fin[] = {{"fifo", real1}};
    json_t *none = NULL;
    CHECK(pl_snapshot_build(fin, 1, "job", "", NULL, &none, &d) != FTL_OK);
    CHECK_STR_CONTAINS(d.msg, "input 'fifo'");
    unlink(real1);
    CHECK(symlink("/dev/zero", link) == 0);
    pl_snapshot_input zin[] = {{"zero", link}};
    CHECK(pl_snapshot_build(zin, 1, "job", "", NULL, &none, &d) != FTL_OK);
    CHECK_STR_CONTAINS(d.msg, "input 'zero'");
    unlink(link);
    json_decref(ls);
  }

  /* Each change is named. The same size with other bytes is caught by the hash, not the size. */
  put("data/sub/c.txt", "CCC\n");
  CHECK_STR_CONTAINS(verify_err(snap), "input 'data' changed after submission");
  CHECK_STR_CONTAINS(verify_err(snap), "data/sub/c.txt: sha256");
  put("data/sub/c.txt", "ccc\n");
  CHECK_OK(pl_snapshot_verify(snap, &d), d.msg);
  put("data/new.txt", "x");
  CHECK_STR_CONTAINS(verify_err(snap), "data/new.txt: added to the folder");
  snprintf(file, sizeof file, "%s/data/new.txt", root);
  unlink(file);
  snprintf(file, sizeof file, "%s/data/a.txt", root);
  unlink(file);
  CHECK_STR_CONTAINS(verify_err(snap), "data/a.txt: removed from the folder");
  put("data/a.txt", "aaa\n");
  put("base.h5", "weights, longer");
  CHECK_STR_CONTAINS(verify_err(snap), "input 'base' changed after submission");
  CHECK_STR_CONTAINS(verify_err(snap), "size 7 bytes at submission, 15 now");
  snprintf(file, sizeof file, "%s/base.h5", root);
  unlink(file);
  CHECK_STR_CONTAINS(verify_err(snap), "base.h5");
  /* Vanished is a change, not "no snapshot" (a relaunch goes on after FTL_ERR_NOTFOUND). */
  CHECK_INT_EQ(pl_snapshot_verify(snap, &d), FTL_ERR_CORRUPT);
  CHECK_INT_EQ(pl_snapshot_verify_run_dir(root, &d), FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, "input 'base' changed after submission");

  /* A missing input at submission is named. */
  json_t *none = NULL;
  CHECK_INT_EQ(pl_snapshot_build(in + 1, 1, "job", "", NULL, &none, &d), FTL_ERR_NOTFOUND);
  CHECK_STR_CONTAINS(d.msg, "input 'base'");
  json_decref(snap);
  json_decref(gate);
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof cmd, "rm -rf %s", root);
  CHECK(system(cmd) == 0);
  puts("ok");
  return 0;
}
