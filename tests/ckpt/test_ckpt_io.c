/* tests/ckpt/test_ckpt_io.c: the MPI-free layers of the checkpoint module in one process:
 * shard write + verified read of every dtype, the checksum naming the tensor at fault, the
 * HDF5 structure agreeing with the manifest, the file seam's faults (ENOSPC, failed fsync and
 * rename, a torn write), the atomic write's crash-free path, manifest round trip and rejection
 * of broken manifests, and the catalog (list, mark bad, delete). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/catalog.h"
#include "core/fs.h"
#include "ftl/core.h"
#include "ftl_test.h"
#include "checkpoint/h5.h"
#include "checkpoint/manifest.h"
#include "checkpoint/shard.h"

#define NT 11 /* every dtype, one 0-d tensor... see make_manifest */

static char root[PATH_MAX];
static void *bounce;
#define BOUNCE (64u << 10)

static void fill(void *p, size_t n, unsigned seed) {
  unsigned char *b = p;
  uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b[i] = (unsigned char)x;
  }
}

/* One item per dtype (10), shaped [rows, 3] with rows 5..14, plus a 0-d f64 and a blob. */
static ck_manifest *make_manifest(int64_t step) {
  ck_manifest *m = ck_manifest_alloc(12, 1);
  CHECK(m);
  m->step = step;
  for (int i = 0; i < 10; i++) {
    ck_item *it = &m->items[i];
    snprintf(it->name, sizeof it->name, "t%d_%s", i, ck_dtype_name((ftl_dtype)i));
    it->dtype = (ftl_dtype)i;
    it->kind = CK_KIND_SPLIT;
    it->ndim = 2;
    it->shape[0] = 5 + i;
    it->shape[1] = 3;
  }
  ck_item *s = &m->items[10];
  snprintf(s->name, sizeof s->name, "scalar");
  s->dtype = FTL_DTYPE_F64;
  s->kind = CK_KIND_REPLICATED;
  s->ndim = 0;
  ck_item *b = &m->items[11];
  snprintf(b->name, sizeof b->name, "cursor");
  b->dtype = FTL_DTYPE_U8;
  b->kind = CK_KIND_BLOB_GLOBAL;
  b->ndim = 1;
  b->shape[0] = 40;
  ck_shard *sh = &m->shards[0];
  sh->rank = 0;
  ck_shard_file_name(0, sh->file);
  sh->npieces = 12;
  sh->pieces = ftl_calloc(12, sizeof *sh->pieces);
  CHECK(sh->pieces);
  for (int i = 0; i < 12; i++) {
    sh->pieces[i].item = i;
    sh->pieces[i].row_start = 0;
    sh->pieces[i].row_count = ck_item_rows(&m->items[i]);
  }
  return m;
}

static size_t piece_bytes(const ck_manifest *m, int i) {
  int ovf;
  return (size_t)(ck_item_row_bytes(&m->items[i], &ovf) * (uint64_t)ck_item_rows(&m->items[i]));
}

static void write_step(const char *base, ck_manifest *m, void **data) {
  char sd[PATH_MAX];
  ftl_diag d = {{0}};
  CHECK_OK(ck_step_dir(base, m->step, sd, sizeof sd), "dir");
  CHECK_OK(ftl_mkdir_p(sd, &d), d.msg);
  CHECK_OK(ck_shard_write(sd, m, &m->shards[0], (const void *const *)data, 1000, bounce, BOUNCE, m->step, 1, &d),
           d.msg);
  char *text = NULL;
  size_t len = 0;
  CHECK_OK(ck_manifest_to_json(m, &text, &len, &d), d.msg);
  char mp[PATH_MAX];
  CHECK_OK(ftl_fmt(mp, sizeof mp, "%s/manifest.json", sd), "path");
  CHECK_OK(core_fs_write_atomic(mp, text, len, "mid_manifest", 0, m->step, &d), d.msg);
  ftl_free(text);
}

static void test_roundtrip(void) {
  char base[PATH_MAX];
  ftl_diag d = {{0}};
  CHECK_OK(ftl_fmt(base, sizeof base, "%s/rt", root), "path");
  ck_manifest *m = make_manifest(100);
  void *data[12], *back[12];
  for (int i = 0; i < 12; i++) {
    data[i] = malloc(piece_bytes(m, i));
    back[i] = calloc(1, piece_bytes(m, i));
    fill(data[i], piece_bytes(m, i), (unsigned)i);
  }
  write_step(base, m, data);

  /* Parse what was written, then verify + read every piece in one pass. */
  ck_manifest *r = NULL;
  CHECK_OK(ck_read_manifest(base, 100, &r, NULL, NULL, &d), d.msg);
  CHECK_INT_EQ(r->nitems, 12);
  CHECK_INT_EQ(r->shards[0].checksum, m->shards[0].checksum);
  ck_need needs[12];
  int order[12];
  for (int i = 0; i < 12; i++)
    order[i] = i;
  /* needs sorted by file offset */
  for (int i = 0; i < 12; i++)
    for (int j = i + 1; j < 12; j++)
      if (r->shards[0].pieces[order[j]].file_offset < r->shards[0].pieces[order[i]].file_offset) {
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
  for (int k = 0; k < 12; k++) {
    const ck_piece *pc = &r->shards[0].pieces[order[k]];
    needs[k] = (ck_need){pc->file_offset, pc->size_bytes, back[pc->item]};
  }
  char sd[PATH_MAX];
  CHECK_OK(ck_step_dir(base, 100, sd, sizeof sd), "dir");
  CHECK_OK(ck_shard_verify_read(sd, r, &r->shards[0], needs, 12, 7, bounce, BOUNCE, &d), d.msg);
  for (int i = 0; i < 12; i++)
    CHECK(memcmp(data[i], back[i], piece_bytes(m, i)) == 0);
  for (int i = 0; i < 12; i++)
    memset(back[i], 0, piece_bytes(m, i));
  CHECK_OK(ck_shard_read(sd, &r->shards[0], needs, 12, &d), d.msg);
  for (int i = 0; i < 12; i++)
    CHECK(memcmp(data[i], back[i], piece_bytes(m, i)) == 0);

  /* HDF5's structure agrees with the manifest. */
  char path[PATH_MAX];
  CHECK_OK(ftl_fmt(path, sizeof path, "%s/shard-00000.h5", sd), "path");
  CHECK_OK(ck_h5_check_shard(path, r, &r->shards[0], &d), d.msg);
  /* A manifest edited after the commit (its own checksums still hold) disagrees with the shard's
   * own HDF5 description: dtype, layout, shape, step, place; each is named. */
  ck_item saved = r->items[0];
  r->items[0].dtype = FTL_DTYPE_I32; /* t0 is f32: the same size, so only the shard can tell */
  CHECK(ck_h5_check_shard(path, r, &r->shards[0], &d) == FTL_ERR_CORRUPT);
  CHECK(strstr(d.msg, "dtype mismatch") != NULL);
  r->items[0] = saved;
  r->items[0].kind = CK_KIND_REPLICATED;
  CHECK(ck_h5_check_shard(path, r, &r->shards[0], &d) == FTL_ERR_CORRUPT);
  CHECK(strstr(d.msg, "layout mismatch") != NULL);
  r->items[0] = saved;
  r->items[0].shape[r->items[0].ndim - 1] += 1;
  CHECK(ck_h5_check_shard(path, r, &r->shards[0], &d) == FTL_ERR_CORRUPT);
  CHECK(strstr(d.msg, "shape mismatch") != NULL);
  r->items[0] = saved;
  r->step = 99;
  CHECK(ck_h5_check_shard(path, r, &r->shards[0], &d) == FTL_ERR_CORRUPT);
  CHECK(strstr(d.msg, "step mismatch") != NULL);
  r->step = 100;
  r->shards[0].pieces[0].file_offset += 1;
  CHECK(ck_h5_check_shard(path, r, &r->shards[0], &d) == FTL_ERR_CORRUPT);
  r->shards[0].pieces[0].file_offset -= 1;
  CHECK_OK(ck_h5_check_shard(path, r, &r->shards[0], &d), d.msg);
  CHECK_INT_EQ(ck_h5_open_objects(), 0);

  /* One flipped byte inside tensor t3_i64 is named by verification. */
  const ck_piece *p3 = &r->shards[0].pieces[3];
  int fd = open(path, O_RDWR);
  CHECK(fd >= 0);
  unsigned char byte;
  CHECK(pread(fd, &byte, 1, (off_t)(p3->file_offset + 5)) == 1);
  byte ^= 0x10;
  CHECK(pwrite(fd, &byte, 1, (off_t)(p3->file_offset + 5)) == 1);
  ftl_err rc = ck_shard_verify_read(sd, r, &r->shards[0], NULL, 0, 4096, bounce, BOUNCE, &d);
  CHECK_INT_EQ(rc, FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, "shard-00000.h5");
  CHECK_STR_CONTAINS(d.msg, "tensor 't3_i64'");
  byte ^= 0x10;
  CHECK(pwrite(fd, &byte, 1, (off_t)(p3->file_offset + 5)) == 1);
  /* A flipped byte in HDF5's metadata (the superblock signature area is byte 0..7; use byte 60). */
  CHECK(pread(fd, &byte, 1, 60) == 1);
  byte ^= 1;
  CHECK(pwrite(fd, &byte, 1, 60) == 1);
  rc = ck_shard_verify_read(sd, r, &r->shards[0], NULL, 0, 4096, bounce, BOUNCE, &d);
  CHECK_INT_EQ(rc, FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, "metadata");
  byte ^= 1;
  CHECK(pwrite(fd, &byte, 1, 60) == 1);
  /* A truncated shard fails on its size. */
  struct stat st;
  CHECK(fstat(fd, &st) == 0);
  CHECK(ftruncate(fd, st.st_size - 1) == 0);
  rc = ck_shard_verify_read(sd, r, &r->shards[0], NULL, 0, 4096, bounce, BOUNCE, &d);
  CHECK_INT_EQ(rc, FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, "size");
  close(fd);
  unlink(path);
  rc = ck_shard_verify_read(sd, r, &r->shards[0], NULL, 0, 4096, bounce, BOUNCE, &d);
  CHECK_INT_EQ(rc, FTL_ERR_NOTFOUND);

  ck_manifest_free(r);
  ck_manifest_free(m);
  for (int i = 0; i < 12; i++) {
    free(data[i]);
    free(back[i]);
  }
}

/* The file seam's faults surface as clear errors and leave no file under the final name. */
static void test_faults(void) {
  char base[PATH_MAX], sd[PATH_MAX], path[PATH_MAX], tmp[PATH_MAX];
  ftl_diag d = {{0}};
  CHECK_OK(ftl_fmt(base, sizeof base, "%s/faults", root), "path");
  ck_manifest *m = make_manifest(7);
  void *data[12];
  for (int i = 0; i < 12; i++) {
    data[i] = malloc(piece_bytes(m, i));
    fill(data[i], piece_bytes(m, i), (unsigned)i + 50);
  }
  CHECK_OK(ck_step_dir(base, 7, sd, sizeof sd), "dir");
  CHECK_OK(ftl_mkdir_p(sd, &d), d.msg);
  CHECK_OK(ftl_fmt(path, sizeof path, "%s/shard-00000.h5", sd), "p");
  CHECK_OK(ftl_fmt(tmp, sizeof tmp, "%s/shard-00000.h5.tmp", sd), "p");
  struct {
    core_fault_op op;
    long nth;
    int err;
    ftl_err want;
    const char *text;
  } cases[] = {
      {FTL_FAULT_WRITE, 3, ENOSPC, FTL_ERR_NOSPC, "No space left on device"},
      {FTL_FAULT_FSYNC, 1, EIO, FTL_ERR_IO, "fsync of"},
      {FTL_FAULT_RENAME, 1, EIO, FTL_ERR_IO, "rename of"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    core_fault_set(cases[c].op, cases[c].nth, cases[c].err);
    ftl_err rc = ck_shard_write(sd, m, &m->shards[0], (const void *const *)data, 64, bounce, BOUNCE, 7, 1, &d);
    core_fault_clear();
    CHECK_INT_EQ(rc, cases[c].want);
    CHECK_STR_CONTAINS(d.msg, cases[c].text);
    CHECK(access(path, F_OK) != 0);
    CHECK(access(tmp, F_OK) != 0);
  }
  /* A torn write: the writer cannot tell, the reader's checksum can. */
  core_fault_set(FTL_FAULT_TEAR, 2, 0);
  CHECK_OK(ck_shard_write(sd, m, &m->shards[0], (const void *const *)data, 64, bounce, BOUNCE, 7, 1, &d), d.msg);
  core_fault_clear();
  ftl_err rc = ck_shard_verify_read(sd, m, &m->shards[0], NULL, 0, 4096, bounce, BOUNCE, &d);
  CHECK_INT_EQ(rc, FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, "checksum mismatch in tensor");
  /* The atomic write: failures leave the old file in place. */
  char mp[PATH_MAX];
  CHECK_OK(ftl_fmt(mp, sizeof mp, "%s/manifest.json", sd), "p");
  CHECK_OK(core_fs_write_atomic(mp, "old\n", 4, NULL, 0, 7, &d), d.msg);
  core_fault_set(FTL_FAULT_FSYNC, 1, EIO);
  CHECK_INT_EQ(core_fs_write_atomic(mp, "new\n", 4, NULL, 0, 7, &d), FTL_ERR_IO);
  core_fault_set(FTL_FAULT_WRITE, 1, ENOSPC);
  CHECK_INT_EQ(core_fs_write_atomic(mp, "new\n", 4, NULL, 0, 7, &d), FTL_ERR_NOSPC);
  core_fault_clear();
  char *text = NULL;
  size_t len = 0;
  CHECK_OK(ftl_read_file(mp, 100, &text, &len, &d), d.msg);
  CHECK_STR_EQ(text, "old\n");
  ftl_free(text);
  /* Environment parsing of faults. */
  setenv("FTL_CKPT_FAULT", "rename:1:EIO,bogus:2,write:x", 1);
  core_fault_from_env();
  unsetenv("FTL_CKPT_FAULT");
  CHECK_INT_EQ(core_fs_write_atomic(mp, "new\n", 4, NULL, 0, 7, &d), FTL_ERR_IO);
  CHECK_STR_CONTAINS(d.msg, "rename");
  core_fault_clear();
  ck_manifest_free(m);
  for (int i = 0; i < 12; i++)
    free(data[i]);
}

static void expect_bad(const char *text, const char *needle) {
  ck_manifest *m = NULL;
  ftl_diag d = {{0}};
  ftl_err rc = ck_manifest_parse(text, strlen(text), &m, &d);
  if (rc != FTL_ERR_CORRUPT) FTL_TEST_FAIL_("accepted: %s", text);
  CHECK(m == NULL);
  CHECK_STR_CONTAINS(d.msg, needle);
}

static void test_manifest(void) {
  ck_manifest *m = make_manifest(5);
  for (int i = 0; i < 12; i++) {
    m->shards[0].pieces[i].file_offset = 1000u * (unsigned)i;
    m->shards[0].pieces[i].size_bytes = piece_bytes(m, i);
    m->shards[0].pieces[i].checksum = 0x0123456789abcdefull + (unsigned)i;
  }
  m->shards[0].size_bytes = 20000;
  m->shards[0].checksum = 42;
  snprintf(m->job_spec_hash, sizeof m->job_spec_hash, "abc");
  /* The copies' hosts (L1, L2) round-trip, and `levels` says both. */
  snprintf(m->shards[0].l1_host, sizeof m->shards[0].l1_host, "node-a");
  snprintf(m->shards[0].l2_host, sizeof m->shards[0].l2_host, "node-b");
  char *text = NULL;
  size_t len = 0;
  ftl_diag d = {{0}};
  CHECK_OK(ck_manifest_to_json(m, &text, &len, &d), d.msg);
  CHECK_STR_CONTAINS(text, "\"l2_host\": \"node-b\"");
  CHECK_STR_CONTAINS(text, "\"levels\": [\"l1\", \"l2\", \"l3\"]");
  ck_manifest *r = NULL;
  CHECK_OK(ck_manifest_parse(text, len, &r, &d), d.msg);
  CHECK_STR_EQ(r->shards[0].l1_host, "node-a");
  CHECK_STR_EQ(r->shards[0].l2_host, "node-b");
  char *text2 = NULL;
  size_t len2 = 0;
  CHECK_OK(ck_manifest_to_json(r, &text2, &len2, &d), d.msg);
  CHECK_STR_EQ(text, text2);
  CHECK_STR_EQ(r->job_spec_hash, "abc");
  ftl_free(text2);
  ck_manifest_free(r);
  ftl_free(text);
  ck_manifest_free(m);

  const char *ok_head =
      "{\"format\":\"ftl-ckpt-manifest\",\"version\":1,\"step\":3,\"world_size\":1,\"checksum\":\"xxh3-64\",";
  char buf[2048];
  expect_bad("{\"format\":", "not valid JSON");
  expect_bad("[1,2]", "top level");
  expect_bad("{\"format\":\"x\"}", "'format'");
  expect_bad("{\"format\":\"ftl-ckpt-manifest\",\"version\":2}", "version 2");
  expect_bad("{\"format\":\"ftl-ckpt-manifest\",\"version\":1,\"step\":-1}", "'step'");
  snprintf(buf, sizeof buf, "%s\"items\":[],\"shards\":[]}", ok_head);
  expect_bad(buf, "0 shards listed");
  snprintf(buf, sizeof buf,
           "%s\"items\":[{\"name\":\"w\",\"kind\":\"split\",\"dtype\":\"f32\",\"shape\":[4]}],"
           "\"shards\":[{\"rank\":0,\"file\":\"shard-00000.h5\",\"size_bytes\":100,\"checksum\":\"0000000000000000\","
           "\"pieces\":[{\"item\":\"w\",\"row_start\":0,\"row_count\":3,\"file_offset\":0,\"size_bytes\":12,"
           "\"checksum\":\"0000000000000000\"}]}]}",
           ok_head);
  expect_bad(buf, "rows 3..4 are in no shard");
  snprintf(buf, sizeof buf,
           "%s\"items\":[{\"name\":\"w\",\"kind\":\"split\",\"dtype\":\"f32\",\"shape\":[4]}],"
           "\"shards\":[{\"rank\":0,\"file\":\"../../etc/passwd\",\"size_bytes\":100,\"checksum\":\"0000000000000000\","
           "\"pieces\":[]}]}",
           ok_head);
  expect_bad(buf, "file is not");
  /* An l2_host is compared with host names, never used as a path: a slash is refused. */
  snprintf(buf, sizeof buf,
           "%s\"items\":[{\"name\":\"w\",\"kind\":\"split\",\"dtype\":\"f32\",\"shape\":[4]}],"
           "\"shards\":[{\"rank\":0,\"file\":\"shard-00000.h5\",\"size_bytes\":100,\"checksum\":\"0000000000000000\","
           "\"l2_host\":\"../x\",\"pieces\":[{\"item\":\"w\",\"row_start\":0,\"row_count\":4,\"file_offset\":0,"
           "\"size_bytes\":16,\"checksum\":\"0000000000000000\"}]}]}",
           ok_head);
  expect_bad(buf, "shards[0].l2_host is not a host name");
  snprintf(buf, sizeof buf,
           "%s\"items\":[{\"name\":\"w\",\"kind\":\"split\",\"dtype\":\"f32\",\"shape\":[4]}],"
           "\"shards\":[{\"rank\":0,\"file\":\"shard-00000.h5\",\"size_bytes\":10,\"checksum\":\"0000000000000000\","
           "\"pieces\":[{\"item\":\"w\",\"row_start\":0,\"row_count\":4,\"file_offset\":0,\"size_bytes\":16,"
           "\"checksum\":\"0000000000000000\"}]}]}",
           ok_head);
  expect_bad(buf, "outside the 10-byte file");
  snprintf(buf, sizeof buf,
           "%s\"items\":[{\"name\":\"w\",\"kind\":\"split\",\"dtype\":\"f32\",\"shape\":[4]}],"
           "\"shards\":[{\"rank\":0,\"file\":\"shard-00000.h5\",\"size_bytes\":100,\"checksum\":\"0000000000000000\","
           "\"pieces\":[{\"item\":\"w\",\"row_start\":0,\"row_count\":4,\"file_offset\":0,\"size_bytes\":15,"
           "\"checksum\":\"0000000000000000\"}]}]}",
           ok_head);
  expect_bad(buf, "size_bytes 15");
  snprintf(buf, sizeof buf,
           "%s\"items\":[{\"name\":\"w/x\",\"kind\":\"split\",\"dtype\":\"f32\",\"shape\":[4]}],\"shards\":[{}]}",
           ok_head);
  expect_bad(buf, "not a valid name");
  snprintf(buf, sizeof buf,
           "%s\"items\":[{\"name\":\"w\",\"kind\":\"split\",\"dtype\":\"f33\",\"shape\":[4]}],\"shards\":[{}]}",
           ok_head);
  expect_bad(buf, "'dtype'");
  snprintf(buf, sizeof buf,
           "%s\"items\":[{\"name\":\"w\",\"kind\":\"split\",\"dtype\":\"f32\",\"shape\":[9223372036854775807,"
           "9223372036854775807]}],"
           "\"shards\":[{\"rank\":0,\"file\":\"shard-00000.h5\",\"size_bytes\":100,\"checksum\":\"0000000000000000\","
           "\"pieces\":[{\"item\":\"w\",\"row_start\":0,\"row_count\":4,\"file_offset\":0,\"size_bytes\":15,"
           "\"checksum\":\"0000000000000000\"}]}]}",
           ok_head);
  expect_bad(buf, "overflows");
}

static void test_catalog(void) {
  char base[PATH_MAX];
  ftl_diag d = {{0}};
  CHECK_OK(ftl_fmt(base, sizeof base, "%s/cat", root), "path");
  void *data[12];
  for (int s = 1; s <= 3; s++) {
    ck_manifest *m = make_manifest(s * 10);
    for (int i = 0; i < 12; i++) {
      data[i] = malloc(piece_bytes(m, i));
      fill(data[i], piece_bytes(m, i), (unsigned)(i + s));
    }
    write_step(base, m, data);
    for (int i = 0; i < 12; i++)
      free(data[i]);
    ck_manifest_free(m);
  }
  char sd[PATH_MAX];
  CHECK_OK(ck_step_dir(base, 40, sd, sizeof sd), "dir");
  CHECK_OK(ftl_mkdir_p(sd, &d), d.msg);
  CHECK_OK(ck_mark_bad(base, 20, "shard-00000.h5: checksum mismatch", &d), d.msg);
  ck_step_entry *v = NULL;
  int n = 0;
  CHECK_OK(ck_list_steps(base, &v, &n, &d), d.msg);
  CHECK_INT_EQ(n, 4);
  CHECK_INT_EQ(v[0].step, 40);
  CHECK_INT_EQ(v[0].state, CK_STEP_INCOMPLETE);
  CHECK_INT_EQ(v[1].state, CK_STEP_COMMITTED);
  CHECK_INT_EQ(v[2].state, CK_STEP_BAD);
  CHECK_INT_EQ(v[3].state, CK_STEP_COMMITTED);
  ftl_free(v);
  CHECK_OK(ck_delete_step(base, 10, &d), d.msg);
  CHECK_OK(ck_delete_step(base, 40, &d), d.msg);
  CHECK_OK(ck_list_steps(base, &v, &n, &d), d.msg);
  CHECK_INT_EQ(n, 2);
  ftl_free(v);
  /* A missing folder is an empty list. */
  CHECK_OK(ck_list_steps("/nonexistent/ftl", &v, &n, &d), d.msg);
  CHECK_INT_EQ(n, 0);
}

/* An HDF5 failure reads as a sentence with the errno's text, taken from HDF5's error stack
 * (H5Ewalk2), never "HDF5 error: " with nothing after it; and leaves no HDF5 object open. */
static void test_h5_error_text(void) {
  char path[PATH_MAX];
  ftl_diag d = {{0}};
  CHECK_OK(ftl_fmt(path, sizeof path, "%s/a-folder.h5", root), "path");
  CHECK(mkdir(path, 0755) == 0);
  int64_t dims[1] = {4}, shape[1] = {4};
  ck_h5_dset ds = {.path = "/tensors/x", .dtype = FTL_DTYPE_F32, .ndim = 1, .dims = dims, .global_shape = shape,
                   .row_start = 0, .layout = "split"};
  ftl_err rc = ck_h5_create_shard(path, 1, 0, 1, &ds, 1, &d);
  printf("h5 error text: %s\n", d.msg);
  CHECK(rc != FTL_OK);
  CHECK(strstr(d.msg, "cannot create shard") != NULL);
  CHECK(strstr(d.msg, strerror(EISDIR)) != NULL);
  CHECK(strstr(d.msg, "H5Fcreate") != NULL);
  CHECK_INT_EQ(ck_h5_open_objects(), 0);
  rmdir(path);
}

int main(void) {
  const char *t = getenv("TMPDIR");
  CHECK_OK(ftl_fmt(root, sizeof root, "%s/ftl-ckpt-io-XXXXXX", t && *t ? t : "/tmp"), "tmp");
  CHECK(mkdtemp(root));
  bounce = malloc(BOUNCE);
  test_roundtrip();
  test_h5_error_text();
  test_faults();
  test_manifest();
  test_catalog();
  free(bounce);
  if (ftl_test_rm_rf(root) != 0) fprintf(stderr, "warning: could not remove %s\n", root);
  printf("ok\n");
  return 0;
}
