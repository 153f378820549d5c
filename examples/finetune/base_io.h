/* examples/finetune/base_io.h: the base model file (HDF5, docs/formats/base-model.md) and the
 * content hash that names a base model.
 *
 * The content hash is XXH3-64 over the configuration and every tensor's name, shape and bytes in
 * table order (model.h), so it names the weights, not the file: two files holding the same weights
 * have the same hash. The adapter and the checkpoints record it; loading checks it.
 * This file is the example's only user of the HDF5 library. */
#ifndef FTL_EXAMPLES_FINETUNE_BASE_IO_H
#define FTL_EXAMPLES_FINETUNE_BASE_IO_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

uint64_t ft_params_hash(const ft_params *p);

/* Writes p to path durably and atomically (path.tmp, fsync, rename, fsync of the folder) with
 * its content hash and a free-form provenance text (may be NULL). 0 or -1 with msg. */
int ft_base_save(const char *path, const ft_params *p, const char *provenance, char *msg, size_t msg_size);

/* Reads a base model into *p (created here; the caller destroys it) and checks its content hash;
 * *hash_out gets it. 0 or -1 with msg (a missing file says "not found"). */
int ft_base_load(const char *path, ft_params *p, uint64_t *hash_out, char *msg, size_t msg_size);

#endif
