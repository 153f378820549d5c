/* core/dtype.c: the one dtype table (core/dtype_table.h) and ftl_dtype's size and name
 * (include/ftl/dtype.h) read from it. The checkpoint manifest, the HDF5 shards and the safetensors
 * codec name dtypes through this table only. */
#include "core/dtype_table.h"

#include <string.h>

#define ROW(id, ftl, bits, cls, name, manifest, st) [CORE_DT_##id] = {CORE_DT_##id, ftl, bits, cls, name, manifest, st}
#define ST_ONLY(id, bits, cls) ROW(id, -1, bits, cls, NULL, NULL, #id)

static const core_dtype_row table[CORE_DT_COUNT] = {
    ST_ONLY(BOOL, 8, CORE_DT_BOOLEAN),
    ST_ONLY(F4, 4, CORE_DT_FLOAT),
    ST_ONLY(F6_E2M3, 6, CORE_DT_FLOAT),
    ST_ONLY(F6_E3M2, 6, CORE_DT_FLOAT),
    ROW(U8, FTL_DTYPE_U8, 8, CORE_DT_UNSIGNED, "uint8", "u8", "U8"),
    ROW(I8, FTL_DTYPE_I8, 8, CORE_DT_SIGNED, "int8", "i8", "I8"),
    ST_ONLY(F8_E5M2, 8, CORE_DT_FLOAT),
    ST_ONLY(F8_E4M3, 8, CORE_DT_FLOAT),
    ST_ONLY(F8_E8M0, 8, CORE_DT_FLOAT),
    ST_ONLY(F8_E4M3FNUZ, 8, CORE_DT_FLOAT),
    ST_ONLY(F8_E5M2FNUZ, 8, CORE_DT_FLOAT),
    ST_ONLY(I16, 16, CORE_DT_SIGNED),
    ST_ONLY(U16, 16, CORE_DT_UNSIGNED),
    ROW(F16, FTL_DTYPE_F16, 16, CORE_DT_FLOAT, "float16", "f16", "F16"),
    ROW(BF16, FTL_DTYPE_BF16, 16, CORE_DT_FLOAT, "bfloat16", "bf16", "BF16"),
    ROW(I32, FTL_DTYPE_I32, 32, CORE_DT_SIGNED, "int32", "i32", "I32"),
    ROW(U32, FTL_DTYPE_U32, 32, CORE_DT_UNSIGNED, "uint32", "u32", "U32"),
    ROW(F32, FTL_DTYPE_F32, 32, CORE_DT_FLOAT, "float32", "f32", "F32"),
    ST_ONLY(C64, 64, CORE_DT_COMPLEX),
    ROW(F64, FTL_DTYPE_F64, 64, CORE_DT_FLOAT, "float64", "f64", "F64"),
    ROW(I64, FTL_DTYPE_I64, 64, CORE_DT_SIGNED, "int64", "i64", "I64"),
    ROW(U64, FTL_DTYPE_U64, 64, CORE_DT_UNSIGNED, "uint64", "u64", "U64"),
};

/* Not a second table: only where each ftl_dtype's row is, so core_dtype_of needs no search. The
 * unit test checks that it and the rows' ftl fields agree. */
static const unsigned char row_of_ftl[] = {
    [FTL_DTYPE_F32] = CORE_DT_F32, [FTL_DTYPE_F64] = CORE_DT_F64,   [FTL_DTYPE_I32] = CORE_DT_I32,
    [FTL_DTYPE_I64] = CORE_DT_I64, [FTL_DTYPE_U8] = CORE_DT_U8,     [FTL_DTYPE_F16] = CORE_DT_F16,
    [FTL_DTYPE_BF16] = CORE_DT_BF16, [FTL_DTYPE_I8] = CORE_DT_I8,   [FTL_DTYPE_U32] = CORE_DT_U32,
    [FTL_DTYPE_U64] = CORE_DT_U64,
};

const core_dtype_row *core_dtype_row_at(int id) { return id >= 0 && id < CORE_DT_COUNT ? &table[id] : NULL; }

const core_dtype_row *core_dtype_of(ftl_dtype dt) {
  return (unsigned)dt < sizeof row_of_ftl / sizeof row_of_ftl[0] ? &table[row_of_ftl[dt]] : NULL;
}

const core_dtype_row *core_dtype_find(const char *name, core_dtype_naming naming) {
  if (!name) return NULL;
  for (int i = 0; i < CORE_DT_COUNT; i++) {
    const char *n = naming == CORE_DT_NAMED_FTL        ? table[i].name
                    : naming == CORE_DT_NAMED_MANIFEST ? table[i].manifest
                                                       : table[i].safetensors;
    if (n && strcmp(n, name) == 0) return &table[i];
  }
  return NULL;
}

size_t ftl_dtype_size(ftl_dtype dtype) {
  const core_dtype_row *r = core_dtype_of(dtype);
  return r ? (size_t)r->bits / 8 : 0;
}

const char *ftl_dtype_name(ftl_dtype dtype) {
  const core_dtype_row *r = core_dtype_of(dtype);
  return r ? r->name : "unknown";
}
