/* core/dl.c: the one dlopen of an optional vendor library (see core/dl.h). */
#include "core/dl.h"

#include <dlfcn.h>
#include <stdio.h>

void *core_dl_open(const char *soname, const char *build_dir, char *why, size_t why_size) {
  void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (h) return h;
  /* The first failure is the one to show: the soname not found where the host looks. */
  const char *first = dlerror();
  if (why && why_size) snprintf(why, why_size, "%s", first ? first : soname);
  char path[1024];
  if (build_dir && *build_dir && snprintf(path, sizeof path, "%s/%s", build_dir, soname) < (int)sizeof path)
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  return h;
}
