/* core/dtype.c: sizes and names of ftl_dtype (include/ftl/dtype.h). Not here: the manifest's
 * on-disk dtype names (checkpoint/manifest.c). */
#include "ftl/dtype.h"

size_t ftl_dtype_size(ftl_dtype dtype) {
  switch (dtype) {
  case FTL_DTYPE_F32:
  case FTL_DTYPE_I32:
  case FTL_DTYPE_U32: return 4;
  case FTL_DTYPE_F64:
  case FTL_DTYPE_I64:
  case FTL_DTYPE_U64: return 8;
  case FTL_DTYPE_U8:
  case FTL_DTYPE_I8: return 1;
  case FTL_DTYPE_F16:
  case FTL_DTYPE_BF16: return 2;
  }
  return 0;
}

const char *ftl_dtype_name(ftl_dtype dtype) {
  switch (dtype) {
  case FTL_DTYPE_F32: return "float32";
  case FTL_DTYPE_F64: return "float64";
  case FTL_DTYPE_I32: return "int32";
  case FTL_DTYPE_I64: return "int64";
  case FTL_DTYPE_U8: return "uint8";
  case FTL_DTYPE_F16: return "float16";
  case FTL_DTYPE_BF16: return "bfloat16";
  case FTL_DTYPE_I8: return "int8";
  case FTL_DTYPE_U32: return "uint32";
  case FTL_DTYPE_U64: return "uint64";
  }
  return "unknown";
}
