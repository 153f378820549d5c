/* core/dtype_table.h: the one table of element types (core/dtype.c): for each, its size, its class
 * and its names in every format ftl reads or writes (ftl_dtype_name, the checkpoint manifest and
 * HDF5 attribute, the safetensors header). Internal to ftl; the public face is ftl/dtype.h.
 *
 * The rows are safetensors' own dtype list, in safetensors' order (pipeline/safetensors.h numbers
 * the same rows); ten of them are ftl_dtype values, the others exist only in safetensors files.
 * On-disk names never change: they are formats. */
#ifndef FTL_CORE_DTYPE_TABLE_H
#define FTL_CORE_DTYPE_TABLE_H

#include "ftl/dtype.h"

typedef enum core_dtype_id {
  CORE_DT_BOOL = 0,
  CORE_DT_F4,
  CORE_DT_F6_E2M3,
  CORE_DT_F6_E3M2,
  CORE_DT_U8,
  CORE_DT_I8,
  CORE_DT_F8_E5M2,
  CORE_DT_F8_E4M3,
  CORE_DT_F8_E8M0,
  CORE_DT_F8_E4M3FNUZ,
  CORE_DT_F8_E5M2FNUZ,
  CORE_DT_I16,
  CORE_DT_U16,
  CORE_DT_F16,
  CORE_DT_BF16,
  CORE_DT_I32,
  CORE_DT_U32,
  CORE_DT_F32,
  CORE_DT_C64,
  CORE_DT_F64,
  CORE_DT_I64,
  CORE_DT_U64,
  CORE_DT_COUNT
} core_dtype_id;

typedef enum core_dtype_class {
  CORE_DT_FLOAT,
  CORE_DT_SIGNED,   /* two's-complement integer */
  CORE_DT_UNSIGNED,
  CORE_DT_BOOLEAN,
  CORE_DT_COMPLEX,
} core_dtype_class;

typedef struct core_dtype_row {
  core_dtype_id id;
  int ftl;                 /* the ftl_dtype, or -1: a dtype only safetensors files have */
  int bits;                /* of one element (F4 is 4) */
  core_dtype_class cls;
  const char *name;        /* ftl_dtype_name: "float32"; NULL when ftl is -1 */
  const char *manifest;    /* checkpoint manifest and HDF5 "dtype" attribute: "f32"; NULL when ftl is -1 */
  const char *safetensors; /* safetensors header: "F32" */
} core_dtype_row;

/* Which of a row's names core_dtype_find compares. */
typedef enum core_dtype_naming { CORE_DT_NAMED_FTL, CORE_DT_NAMED_MANIFEST, CORE_DT_NAMED_SAFETENSORS } core_dtype_naming;

/* The row of id; NULL when id is not a core_dtype_id. */
const core_dtype_row *core_dtype_row_at(int id);
/* The row of an ftl_dtype; NULL for a value not in the enum. Constant time (collectives call it). */
const core_dtype_row *core_dtype_of(ftl_dtype dt);
/* The row whose name of that naming is exactly name; NULL when none is (or name is NULL). */
const core_dtype_row *core_dtype_find(const char *name, core_dtype_naming naming);

#endif
