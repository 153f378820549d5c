/* launcher/gpu_health.h: GPU health from NVML. The sampler reads one reading per GPU through the
 * NVML seam (launcher/nvml_seam.h): identity, ECC counts, retired pages, row remapping, clock
 * throttle reasons, temperature, power, PCIe replays, NVLink errors and the XIDs NVML's event
 * API delivered since the last pass. Each field may be unsupported by a device or fail: it says
 * so on its own, and the others are still read. The verdict (healthy, degraded, failed, with the
 * reason) is a pure function of the previous and the current reading of one GPU, so the launcher
 * can apply it to readings that came over the wire. Rules and thresholds: docs/gpu.md "GPU
 * health (NVML)".
 *
 * Not here yet: sampling by the rank agent, events, the failure cause, excluding a host (issue
 * 35's later parts). Internal to the launcher. */
#ifndef FTL_LAUNCHER_GPU_HEALTH_H
#define FTL_LAUNCHER_GPU_HEALTH_H

#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"

/* The fields of a reading, each with its own state, and the NVML call that reads it. */
#define LN_GPU_FIELD_MAP(X)                                             \
  X(UUID, "uuid", "nvmlDeviceGetUUID")                                  \
  X(NAME, "name", "nvmlDeviceGetName")                                  \
  X(PCI, "pci_bus_id", "nvmlDeviceGetPciInfo_v3")                       \
  X(ECC, "ecc", "nvmlDeviceGetTotalEccErrors")                          \
  X(RETIRED_PAGES, "retired_pages", "nvmlDeviceGetRetiredPages")        \
  X(RETIRED_PENDING, "retired_pending", "nvmlDeviceGetRetiredPagesPendingStatus") \
  X(REMAPPED_ROWS, "remapped_rows", "nvmlDeviceGetRemappedRows")        \
  X(THROTTLE, "throttle", "nvmlDeviceGetCurrentClocksThrottleReasons")  \
  X(TEMPERATURE, "temperature", "nvmlDeviceGetTemperature")             \
  X(POWER, "power", "nvmlDeviceGetPowerUsage")                          \
  X(PCIE_REPLAY, "pcie_replay", "nvmlDeviceGetPcieReplayCounter")       \
  X(NVLINK, "nvlink", "nvmlDeviceGetNvLinkErrorCounter")                \
  X(XID, "xid", "nvmlEventSetWait_v2")

typedef enum ln_gpu_field {
#define LN_GPU_FIELD_ENUM(id, name, call) LN_GPU_FIELD_##id,
  LN_GPU_FIELD_MAP(LN_GPU_FIELD_ENUM)
#undef LN_GPU_FIELD_ENUM
  LN_GPU_FIELDS
} ln_gpu_field;

/* What became of one field in one reading. */
typedef enum ln_gpu_field_state {
  LN_GPU_KNOWN = 0,       /* read */
  LN_GPU_UNSUPPORTED = 1, /* NVML_ERROR_NOT_SUPPORTED, or the driver lacks the call */
  LN_GPU_UNKNOWN = 2,     /* the call failed: nvml_rc says how */
} ln_gpu_field_state;

const char *ln_gpu_field_name(ln_gpu_field f);
const char *ln_gpu_field_call(ln_gpu_field f);

#define LN_GPU_MAX_XIDS 16

/* One reading of one GPU: plain data, copyable, comparable across hosts. Counters are NVML's
 * own (volatile: since the driver loaded; aggregate: the device's lifetime). */
typedef struct ln_gpu_reading {
  int index; /* NVML's device index */
  unsigned char state[LN_GPU_FIELDS];
  int nvml_rc[LN_GPU_FIELDS]; /* the nvmlReturn_t of a field that is not LN_GPU_KNOWN */
  char uuid[96];
  char name[96];
  char pci_bus_id[32];
  uint64_t ecc_corrected_volatile, ecc_uncorrected_volatile;
  uint64_t ecc_corrected_aggregate, ecc_uncorrected_aggregate;
  uint32_t retired_pages_single_bit, retired_pages_double_bit;
  int retired_pages_pending;
  uint32_t remapped_rows_corrected, remapped_rows_uncorrected;
  int remap_pending, remap_failure;
  uint64_t throttle_reasons; /* NVML's nvmlClocksThrottleReason* bits */
  uint32_t temperature_c;
  uint32_t power_mw;
  uint32_t pcie_replay;
  int nvlink_active_links;
  uint64_t nvlink_crc_errors;    /* DL CRC flit + CRC data, summed over the active links */
  uint64_t nvlink_replay_errors; /* DL replay, summed over the active links */
  int xid_count;                 /* XIDs delivered since the previous pass */
  uint32_t xids[LN_GPU_MAX_XIDS];
  int xids_dropped; /* more than LN_GPU_MAX_XIDS arrived: the first are kept */
} ln_gpu_reading;

/* ---- the sampler: NVML opened once, read on every pass ---------------------------------- */

typedef struct ln_gpu_sampler ln_gpu_sampler;

/* Loads NVML (or the fake, FTL_NVML_FAKE), initialises it and counts the GPUs. No GPU, no NVML,
 * a driver that does not answer: still FTL_OK, with a sampler that is not available and says
 * why. Only FTL_ERR_NOMEM fails. Destroyed by ln_gpu_sampler_close. Not thread-safe. */
ftl_err ln_gpu_sampler_open(ln_gpu_sampler **out, ftl_diag *d);
/* 1 when NVML answered; 0 with the reason in ln_gpu_sampler_why. */
int ln_gpu_sampler_available(const ln_gpu_sampler *s);
const char *ln_gpu_sampler_why(const ln_gpu_sampler *s);
int ln_gpu_sampler_count(const ln_gpu_sampler *s);
/* One reading per GPU into out[0..max) (*count_out of them): every field read, then the XIDs
 * NVML queued since the last pass drained (wait with timeout 0). A GPU whose handle cannot be
 * had is a reading with every field LN_GPU_UNKNOWN. A sampler that is not available reads 0
 * GPUs. Never fails. */
void ln_gpu_sampler_read(ln_gpu_sampler *s, ln_gpu_reading *out, int max, int *count_out);
/* Frees the event set and shuts NVML down. Accepts NULL. */
void ln_gpu_sampler_close(ln_gpu_sampler *s);

/* ---- the verdict: pure ------------------------------------------------------------------- */

typedef enum ln_gpu_verdict_kind {
  LN_GPU_HEALTHY = 0,
  LN_GPU_DEGRADED = 1,
  LN_GPU_FAILED = 2,
} ln_gpu_verdict_kind;

const char *ln_gpu_verdict_name(ln_gpu_verdict_kind k);

/* The thresholds; ln_gpu_health_limits_default gives the documented ones. A rise is between two
 * successive readings of one GPU (the agent samples every few seconds). */
typedef struct ln_gpu_health_limits {
  uint64_t ecc_corrected_rise;  /* corrected volatile ECC errors: degraded at this many more */
  uint64_t nvlink_errors_rise;  /* NVLink CRC + replay errors: degraded at this many more */
  uint32_t pcie_replay_rise;    /* PCIe replays: degraded at this many more */
  uint64_t throttle_mask;       /* the throttle reasons that make a GPU degraded */
} ln_gpu_health_limits;

ln_gpu_health_limits ln_gpu_health_limits_default(void);

typedef struct ln_gpu_verdict {
  ln_gpu_verdict_kind kind;
  char reason[512]; /* "healthy", or the reasons of the verdict's kind, "; "-separated */
} ln_gpu_verdict;

/* 1 when NVIDIA's XID catalogue says this XID means the GPU itself is failing (the list and its
 * sources: gpu_health.c). */
int ln_gpu_xid_is_critical(uint32_t xid);

/* The verdict on cur, given prev (the same GPU's previous reading, or NULL for the first, as
 * before an attempt: then only states, not rises, are judged). A field not LN_GPU_KNOWN in either
 * reading is not judged. limits NULL: the defaults. */
void ln_gpu_verdict_of(const ln_gpu_reading *prev, const ln_gpu_reading *cur, const ln_gpu_health_limits *limits,
                       ln_gpu_verdict *out);

/* The NVML index of the GPU a rank uses, given its local rank and its host's GPU count (> 0): the
 * convention ftl's examples and CUDA_VISIBLE_DEVICES-less programs follow (cudaSetDevice(local rank
 * mod GPUs)), with NVML's order taken as CUDA's (true with CUDA_DEVICE_ORDER=PCI_BUS_ID, and on
 * the usual one-model nodes). The one place this rule is written: MFU's peak (mfu.c) and the GPU
 * named beside a straggler (runview.c) both ask here. */
static inline int ln_gpu_index_of_local_rank(int local_rank, int n_gpus) {
  return n_gpus > 0 && local_rank >= 0 ? local_rank % n_gpus : 0;
}

/* ---- `ftl gpus` (gpus_cmd.c): one check of this host's GPUs, its verdict as the exit code ---- */

extern const char ln_gpus_help[];
int ln_cmd_gpus(int argc, char **argv);

#endif
