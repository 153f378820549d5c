/* tests/core/test_core_dtype.c: the one dtype table (core/dtype_table.h): every ftl_dtype has its
 * row (sizes and names as the formats spell them, which never change), rows and the ftl_dtype
 * index agree, and each naming finds its row back. */
#include <string.h>

#include "core/dtype_table.h"
#include "ftl/core.h"
#include "ftl_test.h"

int main(void) {
  static const struct {
    ftl_dtype dt;
    size_t size;
    const char *name, *manifest, *st;
  } want[] = {
      {FTL_DTYPE_F32, 4, "float32", "f32", "F32"},   {FTL_DTYPE_F64, 8, "float64", "f64", "F64"},
      {FTL_DTYPE_I32, 4, "int32", "i32", "I32"},     {FTL_DTYPE_I64, 8, "int64", "i64", "I64"},
      {FTL_DTYPE_U8, 1, "uint8", "u8", "U8"},        {FTL_DTYPE_F16, 2, "float16", "f16", "F16"},
      {FTL_DTYPE_BF16, 2, "bfloat16", "bf16", "BF16"}, {FTL_DTYPE_I8, 1, "int8", "i8", "I8"},
      {FTL_DTYPE_U32, 4, "uint32", "u32", "U32"},    {FTL_DTYPE_U64, 8, "uint64", "u64", "U64"},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const core_dtype_row *r = core_dtype_of(want[i].dt);
    CHECK(r != NULL);
    CHECK_INT_EQ(r->ftl, want[i].dt);
    CHECK_INT_EQ(ftl_dtype_size(want[i].dt), want[i].size);
    CHECK_STR_EQ(ftl_dtype_name(want[i].dt), want[i].name);
    CHECK_STR_EQ(r->manifest, want[i].manifest);
    CHECK_STR_EQ(r->safetensors, want[i].st);
    CHECK(core_dtype_find(want[i].name, CORE_DT_NAMED_FTL) == r);
    CHECK(core_dtype_find(want[i].manifest, CORE_DT_NAMED_MANIFEST) == r);
    CHECK(core_dtype_find(want[i].st, CORE_DT_NAMED_SAFETENSORS) == r);
  }
  CHECK(core_dtype_of((ftl_dtype)10) == NULL && core_dtype_of((ftl_dtype)-1) == NULL);
  CHECK_INT_EQ(ftl_dtype_size((ftl_dtype)99), 0);
  CHECK_STR_EQ(ftl_dtype_name((ftl_dtype)99), "unknown");
  /* Every row: its id is its place, ftl rows are found by their dtype, the others have no ftl names. */
  int ftl_rows = 0;
  for (int id = 0; id < CORE_DT_COUNT; id++) {
    const core_dtype_row *r = core_dtype_row_at(id);
    CHECK(r != NULL && (int)r->id == id && r->safetensors && r->bits > 0);
    CHECK(core_dtype_find(r->safetensors, CORE_DT_NAMED_SAFETENSORS) == r);
    if (r->ftl >= 0) {
      ftl_rows++;
      CHECK(core_dtype_of((ftl_dtype)r->ftl) == r);
    } else {
      CHECK(r->name == NULL && r->manifest == NULL);
    }
  }
  CHECK_INT_EQ(ftl_rows, 10);
  CHECK(core_dtype_row_at(CORE_DT_COUNT) == NULL && core_dtype_row_at(-1) == NULL);
  CHECK(core_dtype_find("f32", CORE_DT_NAMED_SAFETENSORS) == NULL && core_dtype_find(NULL, CORE_DT_NAMED_FTL) == NULL);
  CHECK_STR_EQ(core_dtype_row_at(CORE_DT_F8_E4M3FNUZ)->safetensors, "F8_E4M3FNUZ");
  CHECK_INT_EQ(core_dtype_row_at(CORE_DT_F4)->bits, 4);
  printf("ok\n");
  return 0;
}
