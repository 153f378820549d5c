/* tests/pipeline/test_safetensors.c: the safetensors writer and strict reader
 * (pipeline/safetensors.h): the reference writer's canonical bytes for a known case, a round
 * trip of every kind of tensor (dtypes, scalar, empty, sub-byte), and a refusal with a message for
 * each way a header can be wrong. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ftl/core.h"
#include "ftl_test.h"
#include "pipeline/safetensors.h"

/* A file from a header text and a data size (zero bytes of data). */
static uint8_t *make(const char *header, size_t data, size_t *size) {
  size_t hl = strlen(header);
  uint8_t *b = calloc(1, 8 + hl + data + 1);
  for (int i = 0; i < 8; i++)
    b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
  memcpy(b + 8, header, hl);
  *size = 8 + hl + data;
  return b;
}

static void expect_refused(const char *header, size_t data, const char *needle) {
  size_t size;
  uint8_t *b = make(header, data, &size);
  pl_st_file *f = NULL;
  ftl_diag d = {{0}};
  ftl_err rc = pl_st_parse(b, size, NULL, &f, &d);
  if (rc != FTL_ERR_CORRUPT) FTL_TEST_FAIL_("accepted (rc %d): %s", (int)rc, header);
  CHECK(f == NULL);
  CHECK_STR_CONTAINS(d.msg, needle);
  free(b);
}

int main(void) {
  /* 1. Canonical bytes: what safetensors' Rust writer (and safetensors.torch.save_file) gives
   * for {"b": F32 [2], "a": I64 [1], "c": F16 [1,2]} with metadata {"format":"pt"}: layout by
   * dtype descending alignment (I64, F32, F16), then name; header padded to a multiple of 8. */
  float fb[2] = {1.0f, -2.0f};
  int64_t ia[1] = {7};
  uint16_t hc[2] = {0x3c00, 0xc000};
  pl_st_tensor t[3] = {
      {.name = "b", .dtype = FTL_ST_F32, .ndim = 1, .shape = {2}, .data = fb, .size_bytes = 8},
      {.name = "a", .dtype = FTL_ST_I64, .ndim = 1, .shape = {1}, .data = ia, .size_bytes = 8},
      {.name = "c", .dtype = FTL_ST_F16, .ndim = 2, .shape = {1, 2}, .data = hc, .size_bytes = 4},
  };
  pl_st_kv meta[] = {{"format", "pt"}};
  uint8_t *img = NULL;
  size_t size = 0;
  ftl_diag d = {{0}};
  CHECK_OK(pl_st_encode(t, 3, meta, 1, &img, &size, &d), d.msg);
  const char *want = "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":"
                     "[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},\"c\":{\"dtype\":\"F16\","
                     "\"shape\":[1,2],\"data_offsets\":[16,20]}}";
  uint64_t hl = 0;
  for (int i = 0; i < 8; i++)
    hl |= (uint64_t)img[i] << (8 * i);
  CHECK_INT_EQ(hl % 8, 0);
  CHECK(hl >= strlen(want) && hl < strlen(want) + 8);
  CHECK(memcmp(img + 8, want, strlen(want)) == 0);
  for (size_t i = strlen(want); i < hl; i++)
    CHECK(img[8 + i] == ' ');
  CHECK_INT_EQ(size, 8 + hl + 20);
  CHECK(memcmp(img + 8 + hl, ia, 8) == 0 && memcmp(img + 8 + hl + 8, fb, 8) == 0 &&
        memcmp(img + 8 + hl + 16, hc, 4) == 0);
  /* Same tensors in another order: same bytes. */
  pl_st_tensor t2[3] = {t[2], t[0], t[1]};
  uint8_t *img2 = NULL;
  size_t size2 = 0;
  CHECK_OK(pl_st_encode(t2, 3, meta, 1, &img2, &size2, &d), d.msg);
  CHECK(size2 == size && memcmp(img, img2, size) == 0);
  ftl_free(img2);

  /* 2. Round trip: parse what was written. */
  pl_st_file *f = NULL;
  CHECK_OK(pl_st_parse(img, size, NULL, &f, &d), d.msg);
  CHECK_INT_EQ(pl_st_count(f), 3);
  CHECK_STR_EQ(pl_st_at(f, 0)->name, "a");
  CHECK_STR_EQ(pl_st_meta_get(f, "format"), "pt");
  const pl_st_tensor *c = pl_st_find(f, "c");
  CHECK(c && c->dtype == FTL_ST_F16 && c->ndim == 2 && c->shape[0] == 1 && c->shape[1] == 2 && c->size_bytes == 4);
  CHECK(memcmp(c->data, hc, 4) == 0);
  CHECK(pl_st_find(f, "zz") == NULL);
  pl_st_free(f);
  ftl_free(img);

  /* Every dtype, a scalar, an empty tensor, a 4-bit tensor of an even count, names that need
   * escaping, several metadata keys (sorted), and no metadata at all. */
  static uint8_t bytes[64];
  for (int i = 0; i < 64; i++)
    bytes[i] = (uint8_t)(i * 37 + 1);
  pl_st_tensor all[FTL_ST_DTYPE_COUNT_ + 3];
  char names[FTL_ST_DTYPE_COUNT_][32];
  size_t n = 0;
  for (int k = 0; k < FTL_ST_DTYPE_COUNT_; k++) {
    int64_t shape[1] = {4};
    uint64_t nb = 0;
    CHECK_OK(pl_st_tensor_bytes((pl_st_dtype)k, 1, shape, &nb), pl_st_dtype_name((pl_st_dtype)k));
    snprintf(names[k], sizeof names[k], "t.%s", pl_st_dtype_name((pl_st_dtype)k));
    all[n++] = (pl_st_tensor){
        .name = names[k], .dtype = (pl_st_dtype)k, .ndim = 1, .shape = {4}, .data = bytes, .size_bytes = nb};
  }
  all[n++] = (pl_st_tensor){.name = "scalar", .dtype = FTL_ST_F64, .ndim = 0, .data = bytes, .size_bytes = 8};
  all[n++] =
      (pl_st_tensor){.name = "empty", .dtype = FTL_ST_BF16, .ndim = 2, .shape = {0, 5}, .data = NULL, .size_bytes = 0};
  all[n++] = (pl_st_tensor){.name = "quote\"back\\slash\ttab\x01",
                             .dtype = FTL_ST_U8,
                             .ndim = 1,
                             .shape = {3},
                             .data = bytes,
                             .size_bytes = 3};
  pl_st_kv m3[] = {{"z", "last"}, {"format", "pt"}, {"a", "first \"q\""}};
  CHECK_OK(pl_st_encode(all, n, m3, 3, &img, &size, &d), d.msg);
  CHECK_OK(pl_st_parse(img, size, NULL, &f, &d), d.msg);
  CHECK_INT_EQ(pl_st_count(f), n);
  CHECK_INT_EQ(pl_st_meta_count(f), 3);
  CHECK_STR_EQ(pl_st_meta_at(f, 0)->key, "a");
  CHECK_STR_EQ(pl_st_meta_get(f, "a"), "first \"q\"");
  for (size_t i = 0; i < n; i++) {
    const pl_st_tensor *x = pl_st_find(f, all[i].name);
    CHECK(x != NULL);
    CHECK_INT_EQ(x->dtype, all[i].dtype);
    CHECK_INT_EQ(x->ndim, all[i].ndim);
    CHECK_INT_EQ(x->size_bytes, all[i].size_bytes);
    if (x->size_bytes) CHECK(memcmp(x->data, all[i].data, (size_t)x->size_bytes) == 0);
  }
  pl_st_free(f);
  ftl_free(img);
  CHECK_OK(pl_st_encode(all, 2, NULL, 0, &img, &size, &d), d.msg);
  CHECK(img[8] == '{' && img[9] == '"' && img[10] == 't'); /* no __metadata__ */
  CHECK_OK(pl_st_parse(img, size, NULL, &f, &d), d.msg);
  CHECK_INT_EQ(pl_st_meta_count(f), 0);
  pl_st_free(f);
  ftl_free(img);

  /* The writer refuses what it cannot write faithfully. */
  pl_st_tensor bad = {.name = "x", .dtype = FTL_ST_F32, .ndim = 1, .shape = {3}, .data = bytes, .size_bytes = 8};
  CHECK(pl_st_encode(&bad, 1, NULL, 0, &img, &size, &d) == FTL_ERR_INVAL);
  pl_st_tensor odd = {.name = "x", .dtype = FTL_ST_F4, .ndim = 1, .shape = {3}, .data = bytes, .size_bytes = 1};
  CHECK(pl_st_encode(&odd, 1, NULL, 0, &img, &size, &d) == FTL_ERR_INVAL);
  pl_st_tensor dup[2] = {t[0], t[0]};
  dup[1].dtype = FTL_ST_F32;
  CHECK(pl_st_encode(dup, 2, NULL, 0, &img, &size, &d) == FTL_ERR_INVAL);
  CHECK_STR_CONTAINS(d.msg, "twice");
  pl_st_tensor reserved = t[0];
  reserved.name = "__metadata__";
  CHECK(pl_st_encode(&reserved, 1, NULL, 0, &img, &size, &d) == FTL_ERR_INVAL);

  /* 3. Refusals, each with its reason. */
  const char *ok = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  size_t okn;
  uint8_t *okb = make(ok, 8, &okn);
  CHECK_OK(pl_st_parse(okb, okn, NULL, &f, &d), d.msg);
  pl_st_free(f);
  CHECK(pl_st_parse(okb, 7, NULL, &f, &d) == FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, "8-byte");
  CHECK(pl_st_parse(okb, okn - 1, NULL, &f, &d) == FTL_ERR_CORRUPT); /* truncated data */
  CHECK_STR_CONTAINS(d.msg, "past the");
  pl_st_limits lim = {.max_header_bytes = 16};
  CHECK(pl_st_parse(okb, okn, &lim, &f, &d) == FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, "over the limit");
  okb[7] = 0x01; /* header length 2^56 + ... */
  CHECK(pl_st_parse(okb, okn, NULL, &f, &d) == FTL_ERR_CORRUPT);
  free(okb);
  okb = make(ok, 8, &okn);
  okb[0] = (uint8_t)(okn); /* header length runs past the file */
  CHECK(pl_st_parse(okb, okn, NULL, &f, &d) == FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, "past the end");
  free(okb);
  expect_refused("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12, "cover 8 of the 12");
  expect_refused(" {\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "start with '{'");
  expect_refused("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}\n", 8, "not a space");
  expect_refused("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x", 8, "not a space");
  expect_refused("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"x\":{}}", 8, "not valid JSON");
  expect_refused("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]", 8, "not valid JSON");
  expect_refused("[1]", 0, "start with '{'");
  expect_refused("{\"__metadata__\":{\"format\":1},\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
                 "not a string");
  expect_refused("{\"__metadata__\":{\"n\":{\"a\":\"b\"}}}", 0, "not a string");
  expect_refused("{\"__metadata__\":[]}", 0, "not an object");
  expect_refused("{\"x\":{\"dtype\":\"F31\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype");
  expect_refused("{\"x\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "dimension 0");
  expect_refused("{\"x\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, "dimension 0");
  expect_refused("{\"x\":{\"dtype\":\"F32\",\"shape\":[281474976710656],\"data_offsets\":[0,8]}}", 8, "dimension 0");
  expect_refused("{\"x\":{\"dtype\":\"F32\",\"shape\":[16777216,16777216],\"data_offsets\":[0,8]}}", 8, "overflows");
  expect_refused("{\"x\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,1]}}", 1, "byte boundary");
  expect_refused("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "need 8");
  expect_refused("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "begin <= end");
  expect_refused("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "a hole");
  expect_refused("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"y\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                 12, "overlap");
  expect_refused("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"y\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                 8, "overlap");
  expect_refused("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"extra\":1}}", 8, "not exactly");
  expect_refused("{\"x\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "not exactly");
  expect_refused("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "not exactly");
  expect_refused("{\"x\":[1,2,3]}", 0, "not exactly");
  expect_refused("{\"x\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", 8, "dimensions");
  expect_refused("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 16, "cover 8 of the 16");
  expect_refused("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "past the 4 data bytes");
  expect_refused("{\"x\\u0000y\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "not valid JSON");
  expect_refused("{\"\xff\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "not valid JSON");
  /* An empty header object with no data is a valid (empty) file. */
  size_t en;
  uint8_t *eb = make("{}      ", 0, &en);
  CHECK_OK(pl_st_parse(eb, en, NULL, &f, &d), d.msg);
  CHECK_INT_EQ(pl_st_count(f), 0);
  pl_st_free(f);
  free(eb);
  printf("ok\n");
  return 0;
}
