/* tests/ckpt/test_manifest_encode.c: the manifest's direct encoder (checkpoint/manifest.c). What it
 * writes parses back to the same manifest and encodes again to the same bytes; strings that need
 * escaping (a quote, a backslash, a control character, UTF-8 in the job-spec hash and the L1 host)
 * survive the round trip; a string that is not UTF-8 is refused rather than written; the L1
 * levels line follows the shards' copies; a step saved below L3 says so (no l3) and round-trips,
 * and one without l3 whose shard has no L1 host is refused; and a large manifest (4,096 shards)
 * round-trips too. */
#include <stdio.h>
#include <string.h>

#include "checkpoint/manifest.h"
#include "ftl/core.h"
#include "ftl_test.h"

/* `world` shards of one split item of world * 2 rows of 3 f32 columns. */
static ck_manifest *make(int world) {
  ck_manifest *m = ck_manifest_alloc(1, world);
  CHECK(m);
  m->step = 7;
  m->created_unix_us = 1234567;
  snprintf(m->items[0].name, sizeof m->items[0].name, "w.0");
  m->items[0].dtype = FTL_DTYPE_F32;
  m->items[0].kind = CK_KIND_SPLIT;
  m->items[0].ndim = 2;
  m->items[0].shape[0] = 2 * world;
  m->items[0].shape[1] = 3;
  for (int r = 0; r < world; r++) {
    ck_shard *sh = &m->shards[r];
    sh->rank = r;
    ck_shard_file_name(r, sh->file);
    sh->size_bytes = 4096;
    sh->checksum = 0xfedcba9876543210ull ^ (unsigned)r;
    sh->pieces = ftl_calloc(1, sizeof *sh->pieces);
    CHECK(sh->pieces);
    sh->npieces = 1;
    sh->pieces[0] = (ck_piece){.item = 0, .row_start = 2 * r, .row_count = 2, .file_offset = 100, .size_bytes = 24,
                               .checksum = (uint64_t)r};
  }
  return m;
}

/* Encodes, parses, encodes again: the same bytes; returns the parsed copy (the caller frees it). */
static ck_manifest *roundtrip(const ck_manifest *m) {
  char *a = NULL, *b = NULL;
  size_t la = 0, lb = 0;
  ftl_diag d = {{0}};
  CHECK_OK(ck_manifest_to_json(m, &a, &la, &d), d.msg);
  ck_manifest *r = NULL;
  CHECK_OK(ck_manifest_parse(a, la, &r, &d), d.msg);
  CHECK_OK(ck_manifest_to_json(r, &b, &lb, &d), d.msg);
  CHECK(la == lb);
  CHECK_STR_EQ(a, b);
  ftl_free(a);
  ftl_free(b);
  return r;
}

int main(void) {
  ck_manifest *m = make(2);
  snprintf(m->job_spec_hash, sizeof m->job_spec_hash, "q\"b\\s\tt\xc3\xa9");
  snprintf(m->shards[0].l1_host, sizeof m->shards[0].l1_host, "n\xc3\xb6""de-1");
  ck_manifest *r = roundtrip(m);
  CHECK_STR_EQ(r->job_spec_hash, "q\"b\\s\tt\xc3\xa9");
  CHECK_STR_EQ(r->shards[0].l1_host, "n\xc3\xb6""de-1");
  CHECK_STR_EQ(r->shards[1].l1_host, "");
  CHECK(r->shards[1].checksum == (0xfedcba9876543210ull ^ 1u));
  CHECK(r->shards[1].pieces[0].row_start == 2);
  ck_manifest_free(r);

  /* Every shard with an L1 copy: the step is complete at L1 too. */
  snprintf(m->shards[1].l1_host, sizeof m->shards[1].l1_host, "node-2");
  char *text = NULL;
  size_t len = 0;
  ftl_diag d = {{0}};
  CHECK_OK(ck_manifest_to_json(m, &text, &len, &d), d.msg);
  CHECK_STR_CONTAINS(text, "\"levels\": [\"l1\", \"l3\"]");
  CHECK_STR_CONTAINS(text, "\"version\": 1,"); /* tests/ckpt/run_mpi.sh edits this spelling */
  ftl_free(text);

  /* A step saved below L3 (ftl_ckpt_save_level): no l3, and the parser keeps that. */
  m->l3 = 0;
  CHECK_OK(ck_manifest_to_json(m, &text, &len, &d), d.msg);
  CHECK_STR_CONTAINS(text, "\"levels\": [\"l1\"]");
  ftl_free(text);
  r = roundtrip(m);
  CHECK_INT_EQ(r->l3, 0);
  ck_manifest_free(r);
  snprintf(m->shards[1].l2_host, sizeof m->shards[1].l2_host, "node-1");
  snprintf(m->shards[0].l2_host, sizeof m->shards[0].l2_host, "node-2");
  CHECK_OK(ck_manifest_to_json(m, &text, &len, &d), d.msg);
  CHECK_STR_CONTAINS(text, "\"levels\": [\"l1\", \"l2\"]");
  /* The same text with a shard's L1 host gone: refused, naming the field. */
  char *cut = strstr(text, "\"l1_host\": \"node-2\", ");
  CHECK(cut);
  memmove(cut, cut + strlen("\"l1_host\": \"node-2\", "), strlen(cut + strlen("\"l1_host\": \"node-2\", ")) + 1);
  ck_manifest *bad = NULL;
  CHECK_INT_EQ(ck_manifest_parse(text, strlen(text), &bad, &d), FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, "shards[1] has none");
  ftl_free(text);
  m->l3 = 1;
  m->shards[0].l2_host[0] = m->shards[1].l2_host[0] = '\0';
  r = roundtrip(m);
  CHECK_INT_EQ(r->l3, 1);
  ck_manifest_free(r);

  /* Not UTF-8: refused, nothing written. */
  snprintf(m->job_spec_hash, sizeof m->job_spec_hash, "bad\xff");
  text = NULL;
  CHECK_INT_EQ(ck_manifest_to_json(m, &text, &len, &d), FTL_ERR_INVAL);
  CHECK(text == NULL);
  CHECK_STR_CONTAINS(d.msg, "UTF-8");
  ck_manifest_free(m);

  m = make(4096);
  r = roundtrip(m);
  CHECK_INT_EQ(r->world_size, 4096);
  CHECK(r->shards[4095].pieces[0].row_start == 8190);
  ck_manifest_free(r);
  ck_manifest_free(m);
  printf("ok\n");
  return 0;
}
