/* ftl/dtype.h: the element types ftl knows (tensors in checkpoints, buffers of collectives), with
 * their sizes and names. A header of its own so the checkpoint file-format layer can name a dtype
 * without including the gang API (ftl/rdzv.h).
 *
 * Not here: how a dtype is written on disk (every format's names are in core's one table,
 * core/dtype_table.h; the manifest reads them through checkpoint/manifest.h) or
 * which dtypes a collective supports (ftl/rdzv.h). Values are never renumbered: the manifest and
 * shard formats depend on them only through their names, but programs may store them. */
#ifndef FTL_DTYPE_H
#define FTL_DTYPE_H

#include "ftl/export.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ftl_dtype {
  FTL_DTYPE_F32 = 0,
  FTL_DTYPE_F64 = 1,
  FTL_DTYPE_I32 = 2,
  FTL_DTYPE_I64 = 3,
  FTL_DTYPE_U8 = 4,
  FTL_DTYPE_F16 = 5,
  FTL_DTYPE_BF16 = 6,
  FTL_DTYPE_I8 = 7,
  FTL_DTYPE_U32 = 8,
  FTL_DTYPE_U64 = 9,
} ftl_dtype;

/* Bytes of one element; 0 for a value not in the enum. Thread-safe. */
FTL_API size_t ftl_dtype_size(ftl_dtype dtype);
/* "float32", "bfloat16", ...; "unknown" for a value not in the enum. Static storage. Thread-safe. */
FTL_API const char *ftl_dtype_name(ftl_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
