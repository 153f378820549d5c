/* cadence/internal.h: what the files of the cadence module share and nobody else uses. */
#ifndef FTL_CADENCE_INTERNAL_H
#define FTL_CADENCE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"

/* Reads a whole ledger under a shared flock (so no appender's line is seen half-written), waiting
 * at most timeout_ms for the lock. *data_out (NUL-terminated) is freed with ftl_free by the caller.
 * FTL_ERR_NOTFOUND when it does not exist. */
ftl_err ftl_cadence_read_ledger_(const char *path, size_t max_bytes, int64_t timeout_ms, char **data_out,
                                 size_t *size_out, ftl_diag *d);

#endif
