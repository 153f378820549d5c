/* ftl/ftl.h: everything a training program needs from ftl, in one include. */
#ifndef FTL_FTL_H
#define FTL_FTL_H

#include "ftl/ckpt.h"
#include "ftl/core.h"
#include "ftl/error.h"
#include "ftl/rdzv.h"

#define FTL_VERSION_STRING "0.1.0"

#endif
