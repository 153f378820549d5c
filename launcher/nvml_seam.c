/* launcher/nvml_seam.c: the real NVML table (libnvidia-ml.so.1 through core_dl_open and dlsym)
 * and the choice between it and the fake (see launcher/nvml_seam.h). The library is opened once
 * per process and never closed: NVML keeps threads and state that a dlclose would pull from
 * under them. NVML's enum parameters are declared as int in the table: a C enum of these small
 * values is an int in the x86-64 and aarch64 ABIs, so the library's symbols are called as is. */
#include "launcher/nvml_seam.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/dl.h"

/* The table's members in the order of ln_nvml_call_names, so one loop resolves them all. */
static void **slot_of(ln_nvml_ops *ops, int i) {
  void **slots[LN_NVML_CALLS] = {
      (void **)&ops->init,          (void **)&ops->shutdown,         (void **)&ops->error_string,
      (void **)&ops->device_count,  (void **)&ops->device_handle,    (void **)&ops->uuid,
      (void **)&ops->name,          (void **)&ops->pci_info,         (void **)&ops->total_ecc_errors,
      (void **)&ops->retired_pages, (void **)&ops->retired_pages_pending, (void **)&ops->remapped_rows,
      (void **)&ops->throttle_reasons, (void **)&ops->temperature,   (void **)&ops->power_usage,
      (void **)&ops->pcie_replay_counter, (void **)&ops->nvlink_state, (void **)&ops->nvlink_error_counter,
      (void **)&ops->event_set_create, (void **)&ops->register_events, (void **)&ops->event_set_wait,
      (void **)&ops->event_set_free,
  };
  return slots[i];
}

/* The real table, resolved once. */
static pthread_once_t real_once = PTHREAD_ONCE_INIT;
static ln_nvml_ops real_ops;
static int real_ok;
static char real_why[512];

static void load_real(void) {
  void *h = core_dl_open("libnvidia-ml.so.1", NULL, real_why, sizeof real_why);
  if (!h) return;
  for (int i = 0; i < LN_NVML_CALLS; i++) {
    const char *sym = ln_nvml_call_names[i];
    void *f = dlsym(h, sym);
    /* Newer drivers name the throttle reasons "clocks event reasons"; the old name is kept as
     * an alias but may one day go. */
    if (!f && i == 12) f = dlsym(h, "nvmlDeviceGetCurrentClocksEventReasons");
    *slot_of(&real_ops, i) = f;
  }
  for (int i = 0; i < 5; i++)
    if (!*slot_of(&real_ops, i)) {
      snprintf(real_why, sizeof real_why, "libnvidia-ml.so.1 has no %s (driver too old)", ln_nvml_call_names[i]);
      memset(&real_ops, 0, sizeof real_ops);
      return;
    }
  real_ok = 1;
}

/* FTL_NVML_FAKE with each "%h" replaced by this host's name ("%%" is "%"), so that the hosts of a
 * multi-host test (network namespaces with host names of their own) each replay their own file.
 * 0 when the result does not fit. */
static int expand_fake_path(const char *pattern, char *out, size_t size) {
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "unknown");
  size_t n = 0;
  for (const char *p = pattern; *p; p++) {
    const char *piece = p;
    size_t len = 1;
    if (p[0] == '%' && p[1] == 'h') piece = host, len = strlen(host), p++;
    else if (p[0] == '%' && p[1] == '%') p++;
    if (n + len >= size) return 0;
    memcpy(out + n, piece, len);
    n += len;
  }
  out[n] = '\0';
  return 1;
}

int ln_nvml_load(ln_nvml_ops *ops, char *why, size_t why_size) {
  memset(ops, 0, sizeof *ops);
  if (why && why_size) why[0] = '\0';
  /* A test hook, read apart from the launch environment (core/launch_env.h says which are). */
  const char *pattern = getenv("FTL_NVML_FAKE");
  char fake[PATH_MAX];
  if (pattern && *pattern && !expand_fake_path(pattern, fake, sizeof fake)) {
    if (why && why_size) snprintf(why, why_size, "FTL_NVML_FAKE=%.200s: the path is too long", pattern);
    return 0;
  }
  if (pattern && *pattern) {
    ftl_diag d = {{0}};
    int missing = 0;
    if (ln_nvml_fake_load(fake, ops, &missing, &d) != FTL_OK) {
      memset(ops, 0, sizeof *ops);
      if (why && why_size) snprintf(why, why_size, "FTL_NVML_FAKE=%s: %s", fake, d.msg);
      return 0;
    }
    if (missing) {
      memset(ops, 0, sizeof *ops);
      if (why && why_size)
        snprintf(why, why_size, "libnvidia-ml.so.1: cannot open shared object file (FTL_NVML_FAKE=%s says missing)",
                 fake);
      return 0;
    }
    return 1;
  }
  pthread_once(&real_once, load_real);
  if (!real_ok) {
    if (why && why_size) snprintf(why, why_size, "%s", real_why);
    return 0;
  }
  *ops = real_ops;
  return 1;
}
