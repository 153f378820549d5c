/* launcher/nvml_fake.c: a fake NVML behind the seam's table (launcher/nvml_seam.h) that replays
 * recorded device states from a JSON document (docs/formats/nvml-fake.md), so GPU health is
 * tested on machines without a GPU or a driver. Each device is a list of successive readings;
 * nvmlDeviceGetHandleByIndex_v2 moves that device to its next reading (the reader asks for the
 * handle once per device per pass), and the last reading repeats. Any call can be made to fail
 * or be unsupported, in every reading or in one, and the library can be declared missing.
 *
 * The NVML names of the seam's calls live here too (ln_nvml_call_names): the real loader
 * (nvml_seam.c) resolves them and the fake's documents name them, and keeping them on this side
 * lets the seam call the fake without the fake calling back.
 *
 * Not here: what a reading means (launcher/gpu_health.c). The fake is process-wide state and not
 * thread-safe: tests and the fuzzer only.
 *
 * Map: the call names; the fake's state; the calls (fake_*) and their table; the document's
 * reader (get_*, parse_devices, ln_nvml_fake_parse); loading a file (ln_nvml_fake_load). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/fs.h"
#include "core/jsonl.h"
#include "ftl/core.h"
#include "launcher/nvml_seam.h"

const char *const ln_nvml_call_names[LN_NVML_CALLS] = {
    "nvmlInit_v2",
    "nvmlShutdown",
    "nvmlErrorString",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetName",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetRetiredPages",
    "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetPcieReplayCounter",
    "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetNvLinkErrorCounter",
    "nvmlEventSetCreate",
    "nvmlDeviceRegisterEvents",
    "nvmlEventSetWait_v2",
    "nvmlEventSetFree",
};

int ln_nvml_call_index(const char *name) {
  for (int i = 0; i < LN_NVML_CALLS; i++)
    if (strcmp(name, ln_nvml_call_names[i]) == 0) return i;
  return -1;
}

#define FAKE_MAX_DEVICES 64
#define FAKE_MAX_READINGS 1024
#define FAKE_MAX_XIDS 16

typedef struct fake_link {
  unsigned long long crc_flit, crc_data, replay, recovery;
} fake_link;

typedef struct fake_reading {
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
  char bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
  unsigned long long ecc[2][2]; /* [NVML_MEMORY_ERROR_TYPE_*][NVML_*_ECC] */
  unsigned int retired[2];      /* [NVML_PAGE_RETIREMENT_CAUSE_*] */
  int retired_pending;
  unsigned int remap_corrected, remap_uncorrected, remap_pending, remap_failure;
  unsigned long long throttle;
  unsigned int temperature_c, power_mw, pcie_replay;
  int link_count; /* 0: NVLink not supported */
  fake_link links[NVML_NVLINK_MAX_LINKS];
  int xid_count;
  unsigned long long xids[FAKE_MAX_XIDS];
  nvmlReturn_t fail[LN_NVML_CALLS]; /* what each call returns instead of its answer; 0: answers */
} fake_reading;

typedef struct fake_device {
  int reading_count;
  fake_reading *readings;
  int cursor;   /* the reading now served; -1 before the first handle */
  int xid_next; /* the next of the reading's XIDs the event set delivers */
  int registered;
} fake_device;

static struct {
  int device_count;
  fake_device *devices;
  nvmlReturn_t init_rc;
  int initialized;
  nvmlReturn_t fail[LN_NVML_CALLS];
  int event_set; /* what an nvmlEventSet_t points at */
} fake;

enum { CALL_INIT, CALL_SHUTDOWN, CALL_ERROR_STRING, CALL_COUNT, CALL_HANDLE, CALL_UUID, CALL_NAME, CALL_PCI, CALL_ECC,
       CALL_RETIRED, CALL_RETIRED_PENDING, CALL_REMAPPED, CALL_THROTTLE, CALL_TEMPERATURE, CALL_POWER, CALL_PCIE_REPLAY,
       CALL_NVLINK_STATE, CALL_NVLINK_ERRORS, CALL_EVENT_CREATE, CALL_EVENT_REGISTER, CALL_EVENT_WAIT, CALL_EVENT_FREE };

/* ---- the calls ---------------------------------------------------------------------------- */

static nvmlReturn_t global_gate(int call) {
  if (fake.fail[call]) return fake.fail[call];
  return fake.initialized ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

/* The device behind a handle and its current reading, or the error the call returns. */
static nvmlReturn_t device_gate(int call, nvmlDevice_t handle, const fake_reading **r) {
  nvmlReturn_t rc = global_gate(call);
  if (rc) return rc;
  const fake_device *dev = (const fake_device *)(const void *)handle;
  if (!dev || dev < fake.devices || dev >= fake.devices + fake.device_count || dev->cursor < 0)
    return NVML_ERROR_INVALID_ARGUMENT;
  *r = &dev->readings[dev->cursor];
  return (*r)->fail[call];
}

static nvmlReturn_t fake_init(void) {
  if (fake.fail[CALL_INIT] || fake.init_rc) return fake.fail[CALL_INIT] ? fake.fail[CALL_INIT] : fake.init_rc;
  fake.initialized = 1;
  return NVML_SUCCESS;
}

static nvmlReturn_t fake_shutdown(void) {
  fake.initialized = 0;
  return NVML_SUCCESS;
}

static const char *fake_error_string(nvmlReturn_t rc) {
  switch (rc) {
  case NVML_SUCCESS: return "Success";
  case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
  case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
  case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
  case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
  case NVML_ERROR_TIMEOUT: return "Timeout";
  case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
  default: return "Unknown Error";
  }
}

static nvmlReturn_t fake_count(unsigned int *count) {
  nvmlReturn_t rc = global_gate(CALL_COUNT);
  if (!rc) *count = (unsigned int)fake.device_count;
  return rc;
}

static nvmlReturn_t fake_handle(unsigned int index, nvmlDevice_t *device) {
  nvmlReturn_t rc = global_gate(CALL_HANDLE);
  if (rc) return rc;
  if (index >= (unsigned int)fake.device_count) return NVML_ERROR_INVALID_ARGUMENT;
  fake_device *dev = &fake.devices[index];
  if (dev->reading_count < 1) return NVML_ERROR_UNKNOWN;
  /* The reading advances here: the reader asks for each handle once per pass. */
  if (dev->cursor + 1 < dev->reading_count) {
    dev->cursor++;
    dev->xid_next = 0;
  }
  *device = (nvmlDevice_t)(void *)dev;
  return dev->readings[dev->cursor].fail[CALL_HANDLE];
}

static nvmlReturn_t copy_text(const char *text, char *out, unsigned int length) {
  size_t n = strlen(text);
  if (n + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(out, text, n + 1);
  return NVML_SUCCESS;
}

static nvmlReturn_t fake_uuid(nvmlDevice_t device, char *uuid, unsigned int length) {
  const fake_reading *r = NULL;
  nvmlReturn_t rc = device_gate(CALL_UUID, device, &r);
  return rc ? rc : copy_text(r->uuid, uuid, length);
}

static nvmlReturn_t fake_name(nvmlDevice_t device, char *name, unsigned int length) {
  const fake_reading *r = NULL;
  nvmlReturn_t rc = device_gate(CALL_NAME, device, &r);
  return rc ? rc : copy_text(r->name, name, length);
}

static nvmlReturn_t fake_pci(nvmlDevice_t device, nvmlPciInfo_t *pci) {
  const fake_reading *r = NULL;
  nvmlReturn_t rc = device_gate(CALL_PCI, device, &r);
  if (rc) return rc;
  memset(pci, 0, sizeof *pci);
  return copy_text(r->bus_id, pci->busId, sizeof pci->busId);
}

static nvmlReturn_t fake_ecc(nvmlDevice_t device, int error_type, int counter_type, unsigned long long *count) {
  const fake_reading *r = NULL;
  nvmlReturn_t rc = device_gate(CALL_ECC, device, &r);
  if (rc) return rc;
  if (error_type < 0 || error_type > 1 || counter_type < 0 || counter_type > 1) return NVML_ERROR_INVALID_ARGUMENT;
  *count = r->ecc[error_type][counter_type];
  return NVML_SUCCESS;
}

/* As NVML documents it: a page_count of 0 asks for the count alone. */
static nvmlReturn_t fake_retired(nvmlDevice_t device, int cause, unsigned int *page_count, unsigned long long *addresses) {
  const fake_reading *r = NULL;
  nvmlReturn_t rc = device_gate(CALL_RETIRED, device, &r);
  if (rc) return rc;
  if (cause < 0 || cause > 1 || !page_count) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int have = r->retired[cause], room = *page_count;
  *page_count = have;
  if (room < have) return NVML_ERROR_INSUFFICIENT_SIZE;
  for (unsigned int i = 0; addresses && i < have; i++) addresses[i] = 0x1000ULL * (i + 1);
  return NVML_SUCCESS;
}

static nvmlReturn_t fake_retired_pending(nvmlDevice_t device, int *is_pending) {
  const fake_reading *r = NULL;
  nvmlReturn_t rc = device_gate(CALL_RETIRED_PENDING, device, &r);
  if (!rc) *is_pending = r->retired_pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return rc;
}

static nvmlReturn_t fake_remapped(nvmlDevice_t device, unsigned int *corrected, unsigned int *uncorrected,
                                  unsigned int *pending, unsigned int *failure) {
  const fake_reading *r = NULL;
  nvmlReturn_t rc = device_gate(CALL_REMAPPED, device, &r);
  if (rc) return rc;
  *corrected = r->remap_corrected;
  *uncorrected = r->remap_uncorrected;
  *pending = r->remap_pending;
  *failure = r->remap_failure;
  return NVML_SUCCESS;
}

static nvmlReturn_t fake_throttle(nvmlDevice_t device, unsigned long long *reasons) {
  const fake_reading *r = NULL;
  nvmlReturn_t rc = device_gate(CALL_THROTTLE, device, &r);
  if (!rc) *reasons = r->throttle;
  return rc;
}

static nvmlReturn_t fake_temperature(nvmlDevice_t device, int sensor, unsigned int *celsius) {
  const fake_reading *r = NULL;
  nvmlReturn_t rc = device_gate(CALL_TEMPERATURE, device, &r);
  if (rc) return rc;
  if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  *celsius = r->temperature_c;
  return NVML_SUCCESS;
}

static nvmlReturn_t fake_power(nvmlDevice_t device, unsigned int *milliwatts) {
  const fake_reading *r = NULL;
  nvmlReturn_t rc = device_gate(CALL_POWER, device, &r);
  if (!rc) *milliwatts = r->power_mw;
  return rc;
}

static nvmlReturn_t fake_pcie_replay(nvmlDevice_t device, unsigned int *value) {
  const fake_reading *r = NULL;
  nvmlReturn_t rc = device_gate(CALL_PCIE_REPLAY, device, &r);
  if (!rc) *value = r->pcie_replay;
  return rc;
}

static nvmlReturn_t fake_nvlink_state(nvmlDevice_t device, unsigned int link, int *is_active) {
  const fake_reading *r = NULL;
  nvmlReturn_t rc = device_gate(CALL_NVLINK_STATE, device, &r);
  if (rc) return rc;
  if (r->link_count == 0) return NVML_ERROR_NOT_SUPPORTED;
  if (link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  *is_active = link < (unsigned int)r->link_count ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

static nvmlReturn_t fake_nvlink_errors(nvmlDevice_t device, unsigned int link, int counter, unsigned long long *value) {
  const fake_reading *r = NULL;
  nvmlReturn_t rc = device_gate(CALL_NVLINK_ERRORS, device, &r);
  if (rc) return rc;
  if (link >= (unsigned int)r->link_count) return NVML_ERROR_NOT_SUPPORTED;
  const fake_link *l = &r->links[link];
  switch (counter) {
  case NVML_NVLINK_ERROR_DL_REPLAY: *value = l->replay; return NVML_SUCCESS;
  case NVML_NVLINK_ERROR_DL_RECOVERY: *value = l->recovery; return NVML_SUCCESS;
  case NVML_NVLINK_ERROR_DL_CRC_FLIT: *value = l->crc_flit; return NVML_SUCCESS;
  case NVML_NVLINK_ERROR_DL_CRC_DATA: *value = l->crc_data; return NVML_SUCCESS;
  default: return NVML_ERROR_INVALID_ARGUMENT;
  }
}

static nvmlReturn_t fake_event_create(nvmlEventSet_t *set) {
  nvmlReturn_t rc = global_gate(CALL_EVENT_CREATE);
  if (!rc) *set = (nvmlEventSet_t)(void *)&fake.event_set;
  return rc;
}

static nvmlReturn_t fake_register(nvmlDevice_t device, unsigned long long types, nvmlEventSet_t set) {
  const fake_reading *r = NULL;
  nvmlReturn_t rc = device_gate(CALL_EVENT_REGISTER, device, &r);
  if (rc) return rc;
  if (set != (nvmlEventSet_t)(void *)&fake.event_set) return NVML_ERROR_INVALID_ARGUMENT;
  if (types & nvmlEventTypeXidCriticalError) ((fake_device *)(void *)device)->registered = 1;
  return NVML_SUCCESS;
}

/* Delivers the current readings' XIDs of the registered devices, one per call, then times out
 * (the reader waits with timeout 0 to drain). */
static nvmlReturn_t fake_event_wait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeout_ms) {
  (void)timeout_ms;
  nvmlReturn_t rc = global_gate(CALL_EVENT_WAIT);
  if (rc) return rc;
  if (set != (nvmlEventSet_t)(void *)&fake.event_set || !data) return NVML_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < fake.device_count; i++) {
    fake_device *dev = &fake.devices[i];
    if (!dev->registered || dev->cursor < 0) continue;
    const fake_reading *r = &dev->readings[dev->cursor];
    if (dev->xid_next >= r->xid_count) continue;
    memset(data, 0, sizeof *data);
    data->device = (nvmlDevice_t)(void *)dev;
    data->eventType = nvmlEventTypeXidCriticalError;
    data->eventData = r->xids[dev->xid_next++];
    return NVML_SUCCESS;
  }
  return NVML_ERROR_TIMEOUT;
}

static nvmlReturn_t fake_event_free(nvmlEventSet_t set) {
  (void)set;
  for (int i = 0; i < fake.device_count; i++) fake.devices[i].registered = 0;
  return fake.fail[CALL_EVENT_FREE];
}

static const ln_nvml_ops fake_ops = {
    .init = fake_init,
    .shutdown = fake_shutdown,
    .error_string = fake_error_string,
    .device_count = fake_count,
    .device_handle = fake_handle,
    .uuid = fake_uuid,
    .name = fake_name,
    .pci_info = fake_pci,
    .total_ecc_errors = fake_ecc,
    .retired_pages = fake_retired,
    .retired_pages_pending = fake_retired_pending,
    .remapped_rows = fake_remapped,
    .throttle_reasons = fake_throttle,
    .temperature = fake_temperature,
    .power_usage = fake_power,
    .pcie_replay_counter = fake_pcie_replay,
    .nvlink_state = fake_nvlink_state,
    .nvlink_error_counter = fake_nvlink_errors,
    .event_set_create = fake_event_create,
    .register_events = fake_register,
    .event_set_wait = fake_event_wait,
    .event_set_free = fake_event_free,
};

/* ---- the document ------------------------------------------------------------------------- */

#define BAD CORE_JSON_BAD

/* A non-negative integer member (absent: *dst unchanged). */
static ftl_err get_u64(const json_t *obj, const char *key, unsigned long long max, unsigned long long *dst,
                       const char *where, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  const json_t *v = json_object_get(obj, key);
  if (!v) return FTL_OK;
  if (!json_is_integer(v) || json_integer_value(v) < 0 || (unsigned long long)json_integer_value(v) > max)
    BAD("%s.%s: not an integer from 0 to %llu", where, key, max);
  *dst = (unsigned long long)json_integer_value(v);
out:
  return rc;
}

static ftl_err get_uint(const json_t *obj, const char *key, unsigned int *dst, const char *where, ftl_diag *d) {
  unsigned long long v = *dst;
  ftl_err rc = get_u64(obj, key, 0xffffffffULL, &v, where, d);
  if (!rc) *dst = (unsigned int)v;
  return rc;
}

static ftl_err get_flag(const json_t *obj, const char *key, unsigned int *dst, const char *where, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  const json_t *v = json_object_get(obj, key);
  if (!v) return FTL_OK;
  if (!json_is_boolean(v)) BAD("%s.%s: not true or false", where, key);
  *dst = json_is_true(v) ? 1u : 0u;
out:
  return rc;
}

static ftl_err get_text(const json_t *obj, const char *key, char *dst, size_t size, const char *where, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  const json_t *v = json_object_get(obj, key);
  if (!v) return FTL_OK;
  if (!json_is_string(v) || json_string_length(v) + 1 > size || strlen(json_string_value(v)) != json_string_length(v))
    BAD("%s.%s: not a string of at most %zu bytes", where, key, size - 1);
  memcpy(dst, json_string_value(v), json_string_length(v) + 1);
out:
  return rc;
}

/* "fail" / "unsupported": a list of NVML call names, each then returning rc_value. */
static ftl_err get_failures(const json_t *obj, const char *key, nvmlReturn_t rc_value, nvmlReturn_t *fail,
                            const char *where, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  const json_t *list = json_object_get(obj, key);
  if (!list) return FTL_OK;
  if (!json_is_array(list) || json_array_size(list) > LN_NVML_CALLS) BAD("%s.%s: not a list of NVML call names", where, key);
  for (size_t i = 0; i < json_array_size(list); i++) {
    const json_t *name = json_array_get(list, i);
    int call = json_is_string(name) ? ln_nvml_call_index(json_string_value(name)) : -1;
    if (call < 0) BAD("%s.%s[%zu]: not an NVML call ftl makes", where, key, i);
    fail[call] = rc_value;
  }
out:
  return rc;
}

static const struct {
  const char *name;
  unsigned long long bit;
} throttle_names[] = {
    {"sw_power_cap", nvmlClocksThrottleReasonSwPowerCap},
    {"hw_slowdown", nvmlClocksThrottleReasonHwSlowdown},
    {"sw_thermal", nvmlClocksThrottleReasonSwThermalSlowdown},
    {"hw_thermal", nvmlClocksThrottleReasonHwThermalSlowdown},
    {"hw_power_brake", nvmlClocksThrottleReasonHwPowerBrakeSlowdown},
};

static ftl_err get_throttle(const json_t *obj, unsigned long long *dst, const char *where, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  const json_t *v = json_object_get(obj, "throttle");
  if (!v) return FTL_OK;
  if (json_is_integer(v)) return get_u64(obj, "throttle", ~0ULL >> 1, dst, where, d);
  if (!json_is_array(v)) BAD("%s.throttle: not a list of reasons or an integer of bits", where);
  *dst = 0;
  for (size_t i = 0; i < json_array_size(v); i++) {
    const json_t *n = json_array_get(v, i);
    size_t k = 0;
    while (k < sizeof throttle_names / sizeof throttle_names[0] &&
           !(json_is_string(n) && strcmp(json_string_value(n), throttle_names[k].name) == 0))
      k++;
    if (k == sizeof throttle_names / sizeof throttle_names[0]) BAD("%s.throttle[%zu]: not a known reason", where, i);
    *dst |= throttle_names[k].bit;
  }
out:
  return rc;
}

static ftl_err get_nvlink(const json_t *obj, fake_reading *r, const char *where, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  const json_t *list = json_object_get(obj, "nvlink");
  if (!list) return FTL_OK;
  if (!json_is_array(list) || json_array_size(list) > NVML_NVLINK_MAX_LINKS)
    BAD("%s.nvlink: not a list of at most %d links", where, NVML_NVLINK_MAX_LINKS);
  r->link_count = (int)json_array_size(list);
  for (int i = 0; i < r->link_count; i++) {
    const json_t *l = json_array_get(list, (size_t)i);
    char at[160];
    snprintf(at, sizeof at, "%s.nvlink[%d]", where, i);
    if (!json_is_object(l)) BAD("%s: not an object", at);
    fake_link *fl = &r->links[i];
    if ((rc = get_u64(l, "crc_flit", ~0ULL >> 1, &fl->crc_flit, at, d)) || (rc = get_u64(l, "crc_data", ~0ULL >> 1, &fl->crc_data, at, d)) ||
        (rc = get_u64(l, "replay", ~0ULL >> 1, &fl->replay, at, d)) || (rc = get_u64(l, "recovery", ~0ULL >> 1, &fl->recovery, at, d)))
      goto out;
  }
out:
  return rc;
}

static ftl_err get_reading(const json_t *obj, fake_reading *r, const char *where, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  if (!json_is_object(obj)) BAD("%s: not an object", where);
  if ((rc = get_text(obj, "uuid", r->uuid, sizeof r->uuid, where, d)) ||
      (rc = get_text(obj, "name", r->name, sizeof r->name, where, d)) ||
      (rc = get_text(obj, "pci_bus_id", r->bus_id, sizeof r->bus_id, where, d)))
    goto out;
  const json_t *ecc = json_object_get(obj, "ecc");
  if (ecc) {
    char at[160];
    snprintf(at, sizeof at, "%s.ecc", where);
    if (!json_is_object(ecc)) BAD("%s: not an object", at);
    if ((rc = get_u64(ecc, "corrected_volatile", ~0ULL >> 1, &r->ecc[0][0], at, d)) ||
        (rc = get_u64(ecc, "corrected_aggregate", ~0ULL >> 1, &r->ecc[0][1], at, d)) ||
        (rc = get_u64(ecc, "uncorrected_volatile", ~0ULL >> 1, &r->ecc[1][0], at, d)) ||
        (rc = get_u64(ecc, "uncorrected_aggregate", ~0ULL >> 1, &r->ecc[1][1], at, d)))
      goto out;
  }
  const json_t *pages = json_object_get(obj, "retired_pages");
  if (pages) {
    char at[160];
    unsigned int pending = (unsigned int)r->retired_pending;
    snprintf(at, sizeof at, "%s.retired_pages", where);
    if (!json_is_object(pages)) BAD("%s: not an object", at);
    if ((rc = get_uint(pages, "single_bit", &r->retired[0], at, d)) ||
        (rc = get_uint(pages, "double_bit", &r->retired[1], at, d)) || (rc = get_flag(pages, "pending", &pending, at, d)))
      goto out;
    r->retired_pending = (int)pending;
  }
  const json_t *rows = json_object_get(obj, "remapped_rows");
  if (rows) {
    char at[160];
    snprintf(at, sizeof at, "%s.remapped_rows", where);
    if (!json_is_object(rows)) BAD("%s: not an object", at);
    if ((rc = get_uint(rows, "corrected", &r->remap_corrected, at, d)) ||
        (rc = get_uint(rows, "uncorrected", &r->remap_uncorrected, at, d)) ||
        (rc = get_flag(rows, "pending", &r->remap_pending, at, d)) || (rc = get_flag(rows, "failure", &r->remap_failure, at, d)))
      goto out;
  }
  if ((rc = get_throttle(obj, &r->throttle, where, d)) || (rc = get_uint(obj, "temperature_c", &r->temperature_c, where, d)) ||
      (rc = get_uint(obj, "power_mw", &r->power_mw, where, d)) || (rc = get_uint(obj, "pcie_replay", &r->pcie_replay, where, d)) ||
      (rc = get_nvlink(obj, r, where, d)))
    goto out;
  const json_t *xids = json_object_get(obj, "xids");
  if (xids) {
    if (!json_is_array(xids) || json_array_size(xids) > FAKE_MAX_XIDS)
      BAD("%s.xids: not a list of at most %d XIDs", where, FAKE_MAX_XIDS);
    for (size_t i = 0; i < json_array_size(xids); i++) {
      const json_t *x = json_array_get(xids, i);
      if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > 0xffff)
        BAD("%s.xids[%zu]: not an XID (0 to 65535)", where, i);
      r->xids[r->xid_count++] = (unsigned long long)json_integer_value(x);
    }
  }
  if ((rc = get_failures(obj, "unsupported", NVML_ERROR_NOT_SUPPORTED, r->fail, where, d)) ||
      (rc = get_failures(obj, "fail", NVML_ERROR_UNKNOWN, r->fail, where, d)))
    goto out;
out:
  return rc;
}

void ln_nvml_fake_reset(void) {
  for (int i = 0; i < fake.device_count; i++) ftl_free(fake.devices[i].readings);
  ftl_free(fake.devices);
  memset(&fake, 0, sizeof fake);
}

static ftl_err parse_devices(const json_t *list, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  if (!json_is_array(list) || json_array_size(list) > FAKE_MAX_DEVICES)
    BAD("devices: not a list of at most %d devices", FAKE_MAX_DEVICES);
  fake.devices = ftl_calloc(json_array_size(list) + 1, sizeof *fake.devices);
  if (!fake.devices) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < json_array_size(list); i++) {
    const json_t *dev = json_array_get(list, i);
    const json_t *readings = json_is_object(dev) ? json_object_get(dev, "readings") : NULL;
    if (!json_is_array(readings) || json_array_size(readings) < 1 || json_array_size(readings) > FAKE_MAX_READINGS)
      BAD("devices[%zu].readings: not a list of 1 to %d readings", i, FAKE_MAX_READINGS);
    fake_device *fd = &fake.devices[fake.device_count++];
    fd->cursor = -1;
    fd->readings = ftl_calloc(json_array_size(readings), sizeof *fd->readings);
    if (!fd->readings) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    fd->reading_count = (int)json_array_size(readings);
    for (size_t k = 0; k < json_array_size(readings); k++) {
      fake_reading *r = &fd->readings[k];
      if (k == 0) {
        snprintf(r->uuid, sizeof r->uuid, "GPU-fake-%zu", i);
        snprintf(r->name, sizeof r->name, "fake GPU");
        snprintf(r->bus_id, sizeof r->bus_id, "00000000:%02zX:00.0", i + 1);
      } else {
        /* A reading says what changed since the one before: the rest carries over, except the
         * XIDs and the failures, which belong to the one reading. */
        *r = fd->readings[k - 1];
        r->xid_count = 0;
        memset(r->fail, 0, sizeof r->fail);
      }
      char at[96];
      snprintf(at, sizeof at, "devices[%zu].readings[%zu]", i, k);
      if ((rc = get_reading(json_array_get(readings, k), r, at, d))) goto out;
    }
  }
out:
  return rc;
}

ftl_err ln_nvml_fake_parse(const char *data, size_t size, ln_nvml_ops *ops, int *missing, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  json_t *doc = NULL;
  ln_nvml_fake_reset();
  memset(ops, 0, sizeof *ops);
  *missing = 0;
  doc = json_loadb(data, size, JSON_REJECT_DUPLICATES, NULL);
  if (!json_is_object(doc)) BAD("not a JSON object");
  const json_t *version = json_object_get(doc, "version");
  if (!json_is_integer(version) || json_integer_value(version) != 1) BAD("version: not 1");
  const json_t *miss = json_object_get(doc, "missing");
  if (miss && !json_is_boolean(miss)) BAD("missing: not true or false");
  unsigned long long init_error = 0;
  if ((rc = get_u64(doc, "init_error", 999, &init_error, "document", d)) ||
      (rc = get_failures(doc, "unsupported", NVML_ERROR_NOT_SUPPORTED, fake.fail, "document", d)) ||
      (rc = get_failures(doc, "fail", NVML_ERROR_UNKNOWN, fake.fail, "document", d)))
    goto out;
  fake.init_rc = (nvmlReturn_t)init_error;
  const json_t *devices = json_object_get(doc, "devices");
  if (devices && (rc = parse_devices(devices, d))) goto out;
  *missing = json_is_true(miss);
  *ops = fake_ops;
out:
  json_decref(doc);
  if (rc) ln_nvml_fake_reset();
  return rc;
}

ftl_err ln_nvml_fake_load(const char *path, ln_nvml_ops *ops, int *missing, ftl_diag *d) {
  char *data = NULL;
  size_t size = 0;
  ftl_err rc = core_fs_read_regular(path, LN_NVML_FAKE_MAX_BYTES, &data, &size, d);
  if (!rc) rc = ln_nvml_fake_parse(data, size, ops, missing, d);
  if (rc == FTL_ERR_CORRUPT && data) ftl_diag_prefix(d, rc, "%s", path);
  ftl_free(data);
  return rc;
}
