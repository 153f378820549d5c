/* ftl/ftl.h: everything a training program needs from ftl, in one include: every public header of
 * include/ftl/ (tests/unit/ftl_h_includes_all.sh keeps it so). */
#ifndef FTL_FTL_H
#define FTL_FTL_H

#include "ftl/export.h"

#include "ftl/adapter.h"
#include "ftl/cadence.h"
#include "ftl/ckpt.h"
#include "ftl/core.h"
#include "ftl/dtype.h"
#include "ftl/error.h"
#include "ftl/rdzv.h"

#define FTL_VERSION_STRING "0.1.0"

#endif
