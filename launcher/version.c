/* launcher/version.c: `ftl version`: ftl's version and what this build has compiled in (CUDA,
 * NCCL, HDF5, MPI: the versions found at configure time, docs/gpu.md), then what this machine
 * has at run time: the CUDA driver, the CUDA runtime and NCCL, looked up where the library looks
 * (core/dl.h) so that the launcher itself never needs them to start (it links none). Used by scripts/gpu-check.sh to say what
 * was tested; not a probe of the GPUs themselves (the GPU tests do that). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "core/dl.h"
#include "ftl/ftl.h"
#include "ftl_build_info.h"
#include "launcher/launcher.h"
#include "launcher/version.h"

const char ln_version_help[] =
    "ftl version: print ftl's version and what this build has compiled in (CUDA runtime, NCCL, HDF5, MPI\n"
    "library, as found at configure time), then the CUDA driver, CUDA runtime and NCCL this machine has\n"
    "at run time.\n";

/* A library's version through one int-returning entry point, or 0 when it is not there; found
 * where the library would find it (core/dl.h). */
static int dl_version(const char *soname, const char *build_dir, const char *fn) {
  void *h = core_dl_open(soname, build_dir, NULL, 0);
  if (!h) return 0;
  int v = 0;
  int (*get)(int *) = NULL;
  void *sym = dlsym(h, fn);
  memcpy(&get, &sym, sizeof get); /* object pointer to function pointer without a cast warning */
  if (!get || get(&v) != 0) v = 0;
  dlclose(h);
  return v;
}

int ln_cmd_version(int argc, char **argv) {
  (void)argc;
  (void)argv;
  printf("ftl %s\n", FTL_VERSION_STRING);
  printf("  CUDA:  %s\n", FTL_BUILD_CUDA);
  printf("  NCCL:  %s\n", FTL_BUILD_NCCL);
  printf("  HDF5:  %s\n", FTL_BUILD_HDF5);
  printf("  MPI:   %s\n", FTL_BUILD_MPI);
  int driver = dl_version("libcuda.so.1", NULL, "cuDriverGetVersion");
  if (driver)
    printf("  this machine: CUDA driver %d.%d", driver / 1000, driver % 1000 / 10);
  else
    printf("  this machine: no CUDA driver (libcuda.so.1)");
  /* The runtime the library loads, when this build has the CUDA paths. */
  if (*FTL_BUILD_CUDART_SONAME) {
    int runtime = dl_version(FTL_BUILD_CUDART_SONAME, FTL_BUILD_CUDA_LIB_DIR, "cudaRuntimeGetVersion");
    if (runtime)
      printf(", CUDA runtime %d.%d", runtime / 1000, runtime % 1000 / 10);
    else
      printf(", no CUDA runtime (%s)", FTL_BUILD_CUDART_SONAME);
  }
  const char *nccl_soname = *FTL_BUILD_NCCL_SONAME ? FTL_BUILD_NCCL_SONAME : "libnccl.so.2";
  int nccl = dl_version(nccl_soname, FTL_BUILD_NCCL_LIB_DIR, "ncclGetVersion");
  /* NCCL >= 2.9 encodes major*10000 + minor*100 + patch. */
  if (nccl)
    printf(", NCCL %d.%d.%d\n", nccl / 10000, nccl % 10000 / 100, nccl % 100);
  else
    printf(", no NCCL library (%s)\n", nccl_soname);
  return FTL_EXIT_OK;
}
