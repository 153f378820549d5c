/* rendezvous/launch.h: the launch record (core/launch_env.h) the gang's context read at ftl_init
 * (and updated when a standby rank is activated), for the modules above the rendezvous that take
 * their settings from it rather than from the environment (checkpoint/ckpt.c). */
#ifndef FTL_RDZV_LAUNCH_H
#define FTL_RDZV_LAUNCH_H

#include "core/launch_env.h"
#include "ftl/rdzv.h"

/* The context's record; NULL for a NULL context. Valid until ftl_finalize. */
const core_launch_env *rz_ctx_launch_env(const ftl_ctx *ctx);

#endif
