/* core/dl.h: loading an optional shared library at run time, the one dlopen of a vendor library
 * (the CUDA runtime and NCCL: rendezvous/gpu_cuda.c; NVML: launcher/nvml_seam.c; what `ftl
 * version` reports: launcher/version.c), so that the library and the launcher look in the same places in the same order and
 * neither links what a CPU node lacks.
 *
 * The order: the soname through the loader's own search (LD_LIBRARY_PATH, the ld.so cache, the
 * system folders), what the host's administrator set up; then the folder the build found the
 * library in, for a toolkit under /usr/local/cuda that no ld.so.conf names.
 *
 * Not here: resolving names (the callers' dlsym tables). */
#ifndef FTL_CORE_DL_H
#define FTL_CORE_DL_H

#include <stddef.h>

/* The handle of soname (RTLD_NOW | RTLD_LOCAL), else of build_dir/soname (build_dir NULL or ""
 * for none); NULL when neither loads, with the loader's text for the soname in why. */
void *core_dl_open(const char *soname, const char *build_dir, char *why, size_t why_size);

#endif
