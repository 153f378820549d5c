/* tests/eval/test_folder_digest.c: the one folder digest (pipeline/snapshot.c, pl_folder_digest)
 * keeps the values stored in locked snapshots and verdicts. Both styles over one folder with a
 * binary file, a text file, a hidden file, a subfolder and a hidden subfolder:
 *   the snapshot's (a folder input): every file, recursively, SHA-256 of sha256sum's text;
 *   the gate's (the adapter folder): the top's regular, non-hidden files, SHA-256 of the canonical
 *   JSON of [{path, size, sha256}].
 * The expected values were computed apart from ftl, with Python's hashlib and json (sort_keys,
 * separators (",", ":"), ensure_ascii), and match what ftl stored before the two were one. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ftl/core.h"
#include "ftl_test.h"
#include "pipeline/snapshot.h"

static char root[PATH_MAX];

/* The folder: a binary file, a text file, a hidden file, a subfolder and a hidden subfolder. */
static const struct {
  const char *rel;
  const char *data;
  size_t len;
} tree[] = {
    {"b.txt", "bee\n", 4}, {"a.bin", "\x00\x01\x02", 3}, {".hidden", "h", 1}, {"sub/c", "see", 3}, {"sub/.d/e", "", 0}};

static void make_tree(void) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/sub", root);
  CHECK(mkdir(path, 0755) == 0);
  snprintf(path, sizeof path, "%s/sub/.d", root);
  CHECK(mkdir(path, 0755) == 0);
  for (size_t i = 0; i < sizeof tree / sizeof *tree; i++) {
    snprintf(path, sizeof path, "%s/%s", root, tree[i].rel);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    CHECK(fd >= 0);
    CHECK(write(fd, tree[i].data, tree[i].len) == (ssize_t)tree[i].len);
    close(fd);
  }
}

#define TREE_HEX "c184270675689819d58aac27b24d725a3f5353581d1b8d7e799707688eef5c71"
#define FLAT_HEX "b4a6a4bf8920303c782643f10d70315bd3a76daca5d5339ca745f900ea45ce8f"

int main(void) {
  snprintf(root, sizeof root, "/tmp/ftl-folder-digest-XXXXXX");
  CHECK(mkdtemp(root));
  make_tree();
  ftl_diag d = {{0}};

  /* The snapshot's: through a folder input, as `ftl run` records it, and through the function. */
  pl_snapshot_input in[] = {{"folder", root}};
  json_t *snap = NULL;
  CHECK_OK(pl_snapshot_build(in, 1, "job", "", NULL, &snap, &d), d.msg);
  CHECK_STR_EQ(pl_snapshot_input_sha256(snap, "folder"), TREE_HEX);
  json_decref(snap);
  json_t *files = NULL;
  char hex[65];
  CHECK_OK(pl_folder_digest(root, PL_FOLDER_TREE, &files, hex, &d), d.msg);
  CHECK_STR_EQ(hex, TREE_HEX);
  CHECK_INT_EQ(json_array_size(files), 5);
  CHECK(json_is_integer(json_object_get(json_array_get(files, 0), "mtime_ns")));
  json_decref(files);

  /* The gate's: the adapter folder's digest in a verdict. */
  CHECK_OK(pl_folder_digest(root, PL_FOLDER_FLAT, &files, hex, &d), d.msg);
  CHECK_STR_EQ(hex, FLAT_HEX);
  CHECK_INT_EQ(json_array_size(files), 2);
  CHECK_STR_EQ(json_string_value(json_object_get(json_array_get(files, 0), "path")), "a.bin");
  CHECK(json_object_get(json_array_get(files, 0), "mtime_ns") == NULL);
  json_decref(files);

  /* A folder that is not there: the gate's style says so (FTL_ERR_NOTFOUND). */
  char gone[PATH_MAX + 16];
  snprintf(gone, sizeof gone, "%s/gone", root);
  CHECK_INT_EQ(pl_folder_digest(gone, PL_FOLDER_FLAT, &files, hex, &d), FTL_ERR_NOTFOUND);

  CHECK(ftl_test_rm_rf(root) == 0);
  return 0;
}
