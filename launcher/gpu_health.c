/* launcher/gpu_health.c: the GPU health sampler over the NVML seam, and the verdict on two
 * readings of one GPU (see launcher/gpu_health.h; rules and thresholds: docs/gpu.md "GPU health
 * (NVML)").
 *
 * Map: field names; the sampler (open, one pass of reads, the XID drain, close); the XID lists;
 * the verdict. */
#include "launcher/gpu_health.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ftl/core.h"
#include "launcher/nvml_seam.h"

static const char *const field_names[LN_GPU_FIELDS] = {
#define LN_GPU_FIELD_NAME(id, name, call) name,
    LN_GPU_FIELD_MAP(LN_GPU_FIELD_NAME)
#undef LN_GPU_FIELD_NAME
};
static const char *const field_calls[LN_GPU_FIELDS] = {
#define LN_GPU_FIELD_CALL(id, name, call) call,
    LN_GPU_FIELD_MAP(LN_GPU_FIELD_CALL)
#undef LN_GPU_FIELD_CALL
};

const char *ln_gpu_field_name(ln_gpu_field f) { return (unsigned)f < LN_GPU_FIELDS ? field_names[f] : "?"; }
const char *ln_gpu_field_call(ln_gpu_field f) { return (unsigned)f < LN_GPU_FIELDS ? field_calls[f] : "?"; }

/* ---- the sampler ---------------------------------------------------------------------------- */

#define MAX_GPUS 64
/* Events drained per pass at most: NVML keeps queueing while we drain, and a pass must end. */
#define MAX_EVENTS_PER_PASS 256

struct ln_gpu_sampler {
  ln_nvml_ops ops;
  int available;
  int initialized;
  int count;
  nvmlEventSet_t events; /* NULL when the event API is not there: XIDs unsupported */
  nvmlDevice_t handles[MAX_GPUS];
  int registered[MAX_GPUS]; /* 1 registered, -1 registration refused (XIDs unsupported) */
  nvmlReturn_t register_rc[MAX_GPUS];
  char why[512];
};

static void set_why(ln_gpu_sampler *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_why(ln_gpu_sampler *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->why, sizeof s->why, fmt, ap);
  va_end(ap);
}

static const char *nvml_text(const ln_gpu_sampler *s, nvmlReturn_t rc) {
  const char *t = s->ops.error_string ? s->ops.error_string(rc) : NULL;
  return t ? t : "unknown NVML error";
}

ftl_err ln_gpu_sampler_open(ln_gpu_sampler **out, ftl_diag *d) {
  ln_gpu_sampler *s = ftl_calloc(1, sizeof *s);
  *out = NULL;
  if (!s) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory for the GPU sampler");
  *out = s;
  if (!ln_nvml_load(&s->ops, s->why, sizeof s->why)) return FTL_OK;
  nvmlReturn_t rc = s->ops.init();
  if (rc) {
    set_why(s, "nvmlInit_v2: %s (%d)", nvml_text(s, rc), rc);
    return FTL_OK;
  }
  s->initialized = 1;
  unsigned int n = 0;
  rc = s->ops.device_count(&n);
  if (rc) {
    set_why(s, "nvmlDeviceGetCount_v2: %s (%d)", nvml_text(s, rc), rc);
    return FTL_OK;
  }
  if (n == 0) {
    set_why(s, "NVML sees no GPU on this host");
    return FTL_OK;
  }
  s->count = n > MAX_GPUS ? MAX_GPUS : (int)n;
  s->available = 1;
  /* XIDs come through the event API; without it the rest is still read. */
  if (s->ops.event_set_create && s->ops.register_events && s->ops.event_set_wait &&
      s->ops.event_set_create(&s->events) != NVML_SUCCESS)
    s->events = NULL;
  return FTL_OK;
}

int ln_gpu_sampler_available(const ln_gpu_sampler *s) { return s && s->available; }
const char *ln_gpu_sampler_why(const ln_gpu_sampler *s) { return s ? s->why : "no sampler"; }
int ln_gpu_sampler_count(const ln_gpu_sampler *s) { return s && s->available ? s->count : 0; }

void ln_gpu_sampler_close(ln_gpu_sampler *s) {
  if (!s) return;
  if (s->events && s->ops.event_set_free) s->ops.event_set_free(s->events);
  if (s->initialized && s->ops.shutdown) s->ops.shutdown();
  ftl_free(s);
}

/* Records what a call said about field f; 1 when it answered. */
static int note(ln_gpu_reading *r, ln_gpu_field f, nvmlReturn_t rc) {
  r->nvml_rc[f] = rc;
  if (rc == NVML_SUCCESS) {
    r->state[f] = LN_GPU_KNOWN;
    return 1;
  }
  r->state[f] = (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_FUNCTION_NOT_FOUND) ? LN_GPU_UNSUPPORTED : LN_GPU_UNKNOWN;
  return 0;
}

static void read_identity(const ln_nvml_ops *o, nvmlDevice_t h, ln_gpu_reading *r) {
  note(r, LN_GPU_FIELD_UUID, o->uuid ? o->uuid(h, r->uuid, sizeof r->uuid) : NVML_ERROR_FUNCTION_NOT_FOUND);
  note(r, LN_GPU_FIELD_NAME, o->name ? o->name(h, r->name, sizeof r->name) : NVML_ERROR_FUNCTION_NOT_FOUND);
  nvmlPciInfo_t pci;
  memset(&pci, 0, sizeof pci);
  if (note(r, LN_GPU_FIELD_PCI, o->pci_info ? o->pci_info(h, &pci) : NVML_ERROR_FUNCTION_NOT_FOUND))
    snprintf(r->pci_bus_id, sizeof r->pci_bus_id, "%.*s", (int)sizeof pci.busId - 1, pci.busId);
  /* A failed call may have left part of a string behind. */
  if (r->state[LN_GPU_FIELD_UUID]) r->uuid[0] = '\0';
  if (r->state[LN_GPU_FIELD_NAME]) r->name[0] = '\0';
  r->uuid[sizeof r->uuid - 1] = r->name[sizeof r->name - 1] = '\0';
}

static void read_memory(const ln_nvml_ops *o, nvmlDevice_t h, ln_gpu_reading *r) {
  nvmlReturn_t rc = NVML_ERROR_FUNCTION_NOT_FOUND;
  if (o->total_ecc_errors) {
    unsigned long long v[4] = {0, 0, 0, 0};
    rc = o->total_ecc_errors(h, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &v[0]);
    if (!rc) rc = o->total_ecc_errors(h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &v[1]);
    if (!rc) rc = o->total_ecc_errors(h, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC, &v[2]);
    if (!rc) rc = o->total_ecc_errors(h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC, &v[3]);
    if (!rc) {
      r->ecc_corrected_volatile = v[0];
      r->ecc_uncorrected_volatile = v[1];
      r->ecc_corrected_aggregate = v[2];
      r->ecc_uncorrected_aggregate = v[3];
    }
  }
  note(r, LN_GPU_FIELD_ECC, rc);

  /* A page count of 0 asks NVML for the count alone: INSUFFICIENT_SIZE then means "there are
   * some", with the count filled in. */
  rc = NVML_ERROR_FUNCTION_NOT_FOUND;
  if (o->retired_pages) {
    unsigned int single = 0, dbl = 0;
    rc = o->retired_pages(h, NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, &single, NULL);
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) rc = NVML_SUCCESS;
    if (!rc) rc = o->retired_pages(h, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, &dbl, NULL);
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) rc = NVML_SUCCESS;
    if (!rc) {
      r->retired_pages_single_bit = single;
      r->retired_pages_double_bit = dbl;
    }
  }
  note(r, LN_GPU_FIELD_RETIRED_PAGES, rc);
  int pending = 0;
  if (note(r, LN_GPU_FIELD_RETIRED_PENDING,
           o->retired_pages_pending ? o->retired_pages_pending(h, &pending) : NVML_ERROR_FUNCTION_NOT_FOUND))
    r->retired_pages_pending = pending == NVML_FEATURE_ENABLED;

  unsigned int corr = 0, unc = 0, rpending = 0, failure = 0;
  if (note(r, LN_GPU_FIELD_REMAPPED_ROWS,
           o->remapped_rows ? o->remapped_rows(h, &corr, &unc, &rpending, &failure) : NVML_ERROR_FUNCTION_NOT_FOUND)) {
    r->remapped_rows_corrected = corr;
    r->remapped_rows_uncorrected = unc;
    r->remap_pending = rpending != 0;
    r->remap_failure = failure != 0;
  }
}

static void read_clocks_and_links(const ln_nvml_ops *o, nvmlDevice_t h, ln_gpu_reading *r) {
  unsigned long long reasons = 0;
  if (note(r, LN_GPU_FIELD_THROTTLE, o->throttle_reasons ? o->throttle_reasons(h, &reasons) : NVML_ERROR_FUNCTION_NOT_FOUND))
    r->throttle_reasons = reasons;
  unsigned int v = 0;
  if (note(r, LN_GPU_FIELD_TEMPERATURE,
           o->temperature ? o->temperature(h, NVML_TEMPERATURE_GPU, &v) : NVML_ERROR_FUNCTION_NOT_FOUND))
    r->temperature_c = v;
  if (note(r, LN_GPU_FIELD_POWER, o->power_usage ? o->power_usage(h, &v) : NVML_ERROR_FUNCTION_NOT_FOUND))
    r->power_mw = v;
  if (note(r, LN_GPU_FIELD_PCIE_REPLAY,
           o->pcie_replay_counter ? o->pcie_replay_counter(h, &v) : NVML_ERROR_FUNCTION_NOT_FOUND))
    r->pcie_replay = v;

  /* NVLink: every active link's CRC (flit and data) and replay counters, summed. A device
   * without NVLink answers NOT_SUPPORTED for link 0; a link number past the device's last is
   * INVALID_ARGUMENT or NOT_SUPPORTED, which ends the walk. */
  nvmlReturn_t rc = o->nvlink_state && o->nvlink_error_counter ? NVML_SUCCESS : NVML_ERROR_FUNCTION_NOT_FOUND;
  uint64_t crc = 0, replay = 0;
  int active_links = 0;
  for (unsigned int link = 0; !rc && link < NVML_NVLINK_MAX_LINKS; link++) {
    int active = 0;
    nvmlReturn_t st = o->nvlink_state(h, link, &active);
    if (st == NVML_ERROR_INVALID_ARGUMENT || (st == NVML_ERROR_NOT_SUPPORTED && link > 0)) break;
    if (st) {
      rc = st;
      break;
    }
    if (active != NVML_FEATURE_ENABLED) continue;
    unsigned long long flit = 0, data = 0, rep = 0;
    if ((rc = o->nvlink_error_counter(h, link, NVML_NVLINK_ERROR_DL_CRC_FLIT, &flit)) ||
        (rc = o->nvlink_error_counter(h, link, NVML_NVLINK_ERROR_DL_CRC_DATA, &data)) ||
        (rc = o->nvlink_error_counter(h, link, NVML_NVLINK_ERROR_DL_REPLAY, &rep)))
      break;
    crc += flit + data;
    replay += rep;
    active_links++;
  }
  if (note(r, LN_GPU_FIELD_NVLINK, rc)) {
    r->nvlink_active_links = active_links;
    r->nvlink_crc_errors = crc;
    r->nvlink_replay_errors = replay;
  }
}

/* Takes every queued event (timeout 0: never waits) and gives each XID to its device's reading. */
static void drain_xids(ln_gpu_sampler *s, ln_gpu_reading *out, int n) {
  nvmlReturn_t rc = NVML_SUCCESS;
  for (int k = 0; s->events && k < MAX_EVENTS_PER_PASS; k++) {
    nvmlEventData_t ev;
    memset(&ev, 0, sizeof ev);
    rc = s->ops.event_set_wait(s->events, &ev, 0);
    if (rc) break;
    if (!(ev.eventType & nvmlEventTypeXidCriticalError)) continue;
    for (int i = 0; i < n; i++) {
      if (out[i].index >= MAX_GPUS || !s->handles[out[i].index] || s->handles[out[i].index] != ev.device) continue;
      ln_gpu_reading *r = &out[i];
      if (r->xid_count < LN_GPU_MAX_XIDS)
        r->xids[r->xid_count++] = (uint32_t)ev.eventData;
      else
        r->xids_dropped++;
      break;
    }
  }
  /* TIMEOUT is "nothing more queued"; anything else means the XIDs of this pass are unknown. */
  nvmlReturn_t state = !s->events ? NVML_ERROR_NOT_SUPPORTED : rc == NVML_ERROR_TIMEOUT ? NVML_SUCCESS : rc;
  for (int i = 0; i < n; i++) {
    int idx = out[i].index;
    nvmlReturn_t own = state;
    if (!own && idx < MAX_GPUS && s->registered[idx] < 0) own = s->register_rc[idx];
    if (!own && idx < MAX_GPUS && !s->handles[idx]) own = NVML_ERROR_UNKNOWN;
    note(&out[i], LN_GPU_FIELD_XID, own);
  }
}

void ln_gpu_sampler_read(ln_gpu_sampler *s, ln_gpu_reading *out, int max, int *count_out) {
  int n = 0;
  for (int i = 0; s && s->available && i < s->count && n < max; i++, n++) {
    ln_gpu_reading *r = &out[n];
    memset(r, 0, sizeof *r);
    r->index = i;
    nvmlDevice_t h = NULL;
    /* Asked for again on every pass: cheap, and the fake takes it as the start of a reading. */
    nvmlReturn_t rc = s->ops.device_handle((unsigned int)i, &h);
    s->handles[i] = rc ? NULL : h;
    if (rc) {
      for (int f = 0; f < LN_GPU_FIELDS; f++) note(r, (ln_gpu_field)f, rc);
      continue;
    }
    /* Registered on the first pass that has the handle; a device that refuses has no XIDs. */
    if (s->events && s->registered[i] == 0) {
      s->register_rc[i] = s->ops.register_events(h, nvmlEventTypeXidCriticalError, s->events);
      s->registered[i] = s->register_rc[i] ? -1 : 1;
    }
    read_identity(&s->ops, h, r);
    read_memory(&s->ops, h, r);
    read_clocks_and_links(&s->ops, h, r);
  }
  if (n) drain_xids(s, out, n);
  *count_out = n;
}

/* ---- XIDs ----------------------------------------------------------------------------------
 * From NVIDIA's XID catalogue (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html) and
 * the dynamic page retirement guide (docs.nvidia.com/deploy/dynamic-page-retirement/): XIDs
 * whose action is a GPU reset or service, i.e. the device itself is failing. Application faults
 * (13 graphics engine exception, 31 memory page fault, 43 stopped channel, 45 preemptive
 * cleanup) are the program's own and are not judged here. */
static const uint32_t critical_xids[] = {
    48,  /* double-bit (uncorrectable) ECC error */
    64,  /* row remapping / page retirement failed: the bad memory stays in use */
    74,  /* NVLink error */
    79,  /* GPU has fallen off the bus */
    94,  /* contained ECC error: the program that met it is lost, the row awaits a reset */
    95,  /* uncontained ECC error: every program on the GPU is lost */
    119, /* GSP RPC timeout */
    120, /* GSP error */
};
/* XIDs that say the GPU works but is wearing: a reset is due, not an end. 63 is a row marked
 * for remapping (or a page retired) that activates at the next reset, the same state as a
 * remap pending; 92 is a high single-bit (corrected) ECC rate. */
static const uint32_t degrading_xids[] = {63, 92};

static int in_list(const uint32_t *list, size_t n, uint32_t xid) {
  for (size_t i = 0; i < n; i++)
    if (list[i] == xid) return 1;
  return 0;
}

int ln_gpu_xid_is_critical(uint32_t xid) { return in_list(critical_xids, sizeof critical_xids / sizeof *critical_xids, xid); }

/* ---- the verdict ---------------------------------------------------------------------------- */

ln_gpu_health_limits ln_gpu_health_limits_default(void) {
  ln_gpu_health_limits l = {
      /* A corrected error now and then is what ECC is for; ten within one sampling interval (a
       * few seconds) is a storm, which precedes retirement and costs the program time. */
      .ecc_corrected_rise = 10,
      /* NVLink retries a flit with a CRC error at once; a handful is noise, a steady stream eats
       * bandwidth of every collective over the link. */
      .nvlink_errors_rise = 16,
      /* Each PCIe replay is a re-sent packet; several per interval is a bad lane or riser. */
      .pcie_replay_rise = 8,
      /* Not the SW power cap: a GPU at full load under its power limit reports it as a matter of
       * course (its clocks follow the budget it was given), and a verdict the policy acts on
       * (a degraded host is left out at the next restart) must not fire on every busy GPU. The
       * HW power brake (the node's power supply or BMC pulling the brake) is a fault. */
      .throttle_mask = nvmlClocksThrottleReasonHwSlowdown | nvmlClocksThrottleReasonSwThermalSlowdown |
                       nvmlClocksThrottleReasonHwThermalSlowdown | nvmlClocksThrottleReasonHwPowerBrakeSlowdown,
  };
  return l;
}

const char *ln_gpu_verdict_name(ln_gpu_verdict_kind k) {
  switch (k) {
  case LN_GPU_HEALTHY: return "healthy";
  case LN_GPU_DEGRADED: return "degraded";
  case LN_GPU_FAILED: return "failed";
  }
  return "?";
}

/* The reasons of each kind, appended as found. */
typedef struct reasons {
  char failed[512];
  char degraded[512];
} reasons;

static void add(char *list, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(char *list, size_t size, const char *fmt, ...) {
  size_t used = strlen(list);
  if (used + 3 >= size) return;
  if (used) {
    memcpy(list + used, "; ", 3);
    used += 2;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(list + used, size - used, fmt, ap);
  va_end(ap);
}

static int known(const ln_gpu_reading *r, ln_gpu_field f) { return r && r->state[f] == LN_GPU_KNOWN; }
/* How much a counter grew (0 when it went down: a driver reload resets volatile counters). */
static uint64_t rise(uint64_t before, uint64_t now) { return now > before ? now - before : 0; }

static void judge_memory(const ln_gpu_reading *prev, const ln_gpu_reading *cur, const ln_gpu_health_limits *l,
                         reasons *why) {
  if (known(cur, LN_GPU_FIELD_ECC)) {
    if (known(prev, LN_GPU_FIELD_ECC)) {
      uint64_t unc = rise(prev->ecc_uncorrected_volatile, cur->ecc_uncorrected_volatile);
      uint64_t unc_agg = rise(prev->ecc_uncorrected_aggregate, cur->ecc_uncorrected_aggregate);
      if (unc || unc_agg)
        add(why->failed, sizeof why->failed, "new uncorrectable ECC error (%llu since the last reading)",
            (unsigned long long)(unc > unc_agg ? unc : unc_agg));
      uint64_t corr = rise(prev->ecc_corrected_volatile, cur->ecc_corrected_volatile);
      if (corr >= l->ecc_corrected_rise)
        add(why->degraded, sizeof why->degraded, "corrected ECC errors rising (+%llu since the last reading)",
            (unsigned long long)corr);
    } else if (!prev && cur->ecc_uncorrected_volatile) {
      /* Before an attempt: an uncorrectable error since the driver loaded leaves memory the
       * driver has not yet retired or remapped. */
      add(why->failed, sizeof why->failed, "%llu uncorrectable ECC errors since the driver loaded",
          (unsigned long long)cur->ecc_uncorrected_volatile);
    }
  }
  if (known(cur, LN_GPU_FIELD_REMAPPED_ROWS)) {
    if (cur->remap_failure) add(why->failed, sizeof why->failed, "row remapping failed");
    if (cur->remap_pending) add(why->degraded, sizeof why->degraded, "row remap pending (a GPU reset activates it)");
  }
  if (known(cur, LN_GPU_FIELD_RETIRED_PENDING) && cur->retired_pages_pending)
    add(why->degraded, sizeof why->degraded, "retired pages pending (a driver reload retires them)");
}

static void judge_clocks_and_links(const ln_gpu_reading *prev, const ln_gpu_reading *cur, const ln_gpu_health_limits *l,
                                   reasons *why) {
  if (known(cur, LN_GPU_FIELD_THROTTLE)) {
    uint64_t t = cur->throttle_reasons & l->throttle_mask;
    if (t & (nvmlClocksThrottleReasonSwThermalSlowdown | nvmlClocksThrottleReasonHwThermalSlowdown))
      add(why->degraded, sizeof why->degraded, "thermal throttling%s",
          known(cur, LN_GPU_FIELD_TEMPERATURE) ? "" : " (temperature unknown)");
    if (t & (nvmlClocksThrottleReasonSwPowerCap | nvmlClocksThrottleReasonHwPowerBrakeSlowdown))
      add(why->degraded, sizeof why->degraded,
          t & nvmlClocksThrottleReasonHwPowerBrakeSlowdown ? "HW power brake" : "power-cap throttling");
    if (t & nvmlClocksThrottleReasonHwSlowdown) add(why->degraded, sizeof why->degraded, "HW slowdown");
  }
  if (known(prev, LN_GPU_FIELD_NVLINK) && known(cur, LN_GPU_FIELD_NVLINK)) {
    uint64_t n = rise(prev->nvlink_crc_errors, cur->nvlink_crc_errors) + rise(prev->nvlink_replay_errors, cur->nvlink_replay_errors);
    if (n >= l->nvlink_errors_rise)
      add(why->degraded, sizeof why->degraded, "NVLink errors growing (+%llu CRC/replay since the last reading)",
          (unsigned long long)n);
  }
  if (known(prev, LN_GPU_FIELD_PCIE_REPLAY) && known(cur, LN_GPU_FIELD_PCIE_REPLAY)) {
    uint64_t n = rise(prev->pcie_replay, cur->pcie_replay);
    if (n >= l->pcie_replay_rise)
      add(why->degraded, sizeof why->degraded, "PCIe replays growing (+%llu since the last reading)", (unsigned long long)n);
  }
}

void ln_gpu_verdict_of(const ln_gpu_reading *prev, const ln_gpu_reading *cur, const ln_gpu_health_limits *limits,
                       ln_gpu_verdict *out) {
  ln_gpu_health_limits defaults = ln_gpu_health_limits_default();
  const ln_gpu_health_limits *l = limits ? limits : &defaults;
  reasons why = {{0}, {0}};
  judge_memory(prev, cur, l, &why);
  judge_clocks_and_links(prev, cur, l, &why);
  if (known(cur, LN_GPU_FIELD_XID))
    for (int i = 0; i < cur->xid_count && i < LN_GPU_MAX_XIDS; i++) {
      if (ln_gpu_xid_is_critical(cur->xids[i]))
        add(why.failed, sizeof why.failed, "critical XID %u", (unsigned)cur->xids[i]);
      else if (in_list(degrading_xids, sizeof degrading_xids / sizeof *degrading_xids, cur->xids[i]))
        add(why.degraded, sizeof why.degraded, "XID %u", (unsigned)cur->xids[i]);
    }
  if (why.failed[0]) {
    out->kind = LN_GPU_FAILED;
    snprintf(out->reason, sizeof out->reason, "%s", why.failed);
  } else if (why.degraded[0]) {
    out->kind = LN_GPU_DEGRADED;
    snprintf(out->reason, sizeof out->reason, "%s", why.degraded);
  } else {
    out->kind = LN_GPU_HEALTHY;
    snprintf(out->reason, sizeof out->reason, "healthy");
  }
}
