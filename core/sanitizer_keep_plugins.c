/* core/sanitizer_keep_plugins.c: linked into every program of a sanitizer build, and only there.
 *
 * Open MPI loads its plugins with dlopen and unloads them in MPI_Finalize. LeakSanitizer reports
 * at exit, after the unload, so the plugins' known allocations at init show up with
 * "<unknown module>" frames that no suppression can match. Making dlclose a no-op keeps the
 * plugins mapped; their frames then carry their names and tests/lsan.supp matches them, while
 * leaks in ftl's own code are still reported. */
#include <dlfcn.h>

int dlclose(void *handle) {
  (void)handle;
  return 0;
}
