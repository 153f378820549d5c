/* launcher/nvml_seam.h: the NVML seam. Every call ftl makes into NVIDIA's management library
 * (libnvidia-ml.so.1, shipped with the driver) goes through one table of function pointers, so a
 * test can put a fake in its place, the way rendezvous/gpu_seam.h does for CUDA and NCCL. The
 * library is loaded at run time through core_dl_open (core/dl.h): never a build or package
 * dependency, and no nvml.h is needed. The few types, constants and signatures used are declared
 * here by hand from NVIDIA's NVML API reference (docs.nvidia.com/deploy/nvml-api/), with the
 * names NVIDIA gives them, so each can be checked against the reference.
 *
 * Which table: FTL_NVML_FAKE=PATH selects the fake (launcher/nvml_fake.c), which replays recorded
 * device states from a JSON file (docs/formats/nvml-fake.md); otherwise the real library. No
 * library, no driver, a broken fake file: "not available" with the reason, never an error.
 *
 * Not here: what is read and what it means (launcher/gpu_health.h). Internal to the launcher. */
#ifndef FTL_LAUNCHER_NVML_SEAM_H
#define FTL_LAUNCHER_NVML_SEAM_H

#include <stddef.h>

#include "ftl/error.h"

/* ---- Declared from NVIDIA's NVML API reference (only what ftl uses) ------------------------- */

typedef int nvmlReturn_t; /* an enum in nvml.h: the values below */
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NO_PERMISSION 4
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_TIMEOUT 10
#define NVML_ERROR_LIBRARY_NOT_FOUND 12
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_UNKNOWN 999

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;

/* nvmlMemoryErrorType_t, nvmlEccCounterType_t */
#define NVML_MEMORY_ERROR_TYPE_CORRECTED 0
#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1
#define NVML_VOLATILE_ECC 0
#define NVML_AGGREGATE_ECC 1
/* nvmlPageRetirementCause_t */
#define NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS 0
#define NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR 1
/* nvmlTemperatureSensors_t */
#define NVML_TEMPERATURE_GPU 0
/* nvmlEnableState_t */
#define NVML_FEATURE_DISABLED 0
#define NVML_FEATURE_ENABLED 1
/* nvmlNvLinkErrorCounter_t */
#define NVML_NVLINK_ERROR_DL_REPLAY 0
#define NVML_NVLINK_ERROR_DL_RECOVERY 1
#define NVML_NVLINK_ERROR_DL_CRC_FLIT 2
#define NVML_NVLINK_ERROR_DL_CRC_DATA 3
/* The most links a device has (NVML_NVLINK_MAX_LINKS: 18 on H100/H200). */
#define NVML_NVLINK_MAX_LINKS 18

/* NvmlClocksThrottleReasons (renamed ClocksEventReasons in newer drivers, same bits). */
#define nvmlClocksThrottleReasonSwPowerCap 0x0000000000000004ULL
#define nvmlClocksThrottleReasonHwSlowdown 0x0000000000000008ULL
#define nvmlClocksThrottleReasonSwThermalSlowdown 0x0000000000000020ULL
#define nvmlClocksThrottleReasonHwThermalSlowdown 0x0000000000000040ULL
#define nvmlClocksThrottleReasonHwPowerBrakeSlowdown 0x0000000000000080ULL

/* Event types (nvmlEventType): the XID critical error. */
#define nvmlEventTypeXidCriticalError 0x0000000000000008ULL

/* Buffer sizes: NVML_DEVICE_UUID_V2_BUFFER_SIZE, NVML_DEVICE_NAME_V2_BUFFER_SIZE,
 * NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE. */
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32

/* nvmlPciInfo_t, as nvmlDeviceGetPciInfo_v3 fills it. */
typedef struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

/* nvmlEventData_t, as nvmlEventSetWait_v2 fills it. */
typedef struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData; /* the XID, for nvmlEventTypeXidCriticalError */
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

/* ---- The table ------------------------------------------------------------------------------ */

/* Each member has the signature of the NVML function it is named after (the real table holds
 * the library's own symbols). A member may be NULL where the driver lacks the symbol (an old
 * driver): the reader then says that field is not supported. The first five are required. */
typedef struct ln_nvml_ops {
  nvmlReturn_t (*init)(void);                                   /* nvmlInit_v2 */
  nvmlReturn_t (*shutdown)(void);                               /* nvmlShutdown */
  const char *(*error_string)(nvmlReturn_t result);            /* nvmlErrorString */
  nvmlReturn_t (*device_count)(unsigned int *count);            /* nvmlDeviceGetCount_v2 */
  nvmlReturn_t (*device_handle)(unsigned int index, nvmlDevice_t *device); /* ..GetHandleByIndex_v2 */
  nvmlReturn_t (*uuid)(nvmlDevice_t device, char *uuid, unsigned int length); /* nvmlDeviceGetUUID */
  nvmlReturn_t (*name)(nvmlDevice_t device, char *name, unsigned int length); /* nvmlDeviceGetName */
  nvmlReturn_t (*pci_info)(nvmlDevice_t device, nvmlPciInfo_t *pci);         /* ..GetPciInfo_v3 */
  nvmlReturn_t (*total_ecc_errors)(nvmlDevice_t device, int error_type, int counter_type,
                                   unsigned long long *count); /* nvmlDeviceGetTotalEccErrors */
  nvmlReturn_t (*retired_pages)(nvmlDevice_t device, int cause, unsigned int *page_count,
                                unsigned long long *addresses); /* nvmlDeviceGetRetiredPages */
  nvmlReturn_t (*retired_pages_pending)(nvmlDevice_t device, int *is_pending); /* ..PendingStatus */
  nvmlReturn_t (*remapped_rows)(nvmlDevice_t device, unsigned int *corrected, unsigned int *uncorrected,
                                unsigned int *pending, unsigned int *failure); /* ..GetRemappedRows */
  nvmlReturn_t (*throttle_reasons)(nvmlDevice_t device, unsigned long long *reasons); /* ..ClocksThrottleReasons */
  nvmlReturn_t (*temperature)(nvmlDevice_t device, int sensor, unsigned int *celsius); /* ..GetTemperature */
  nvmlReturn_t (*power_usage)(nvmlDevice_t device, unsigned int *milliwatts);        /* ..GetPowerUsage */
  nvmlReturn_t (*pcie_replay_counter)(nvmlDevice_t device, unsigned int *value); /* ..GetPcieReplayCounter */
  nvmlReturn_t (*nvlink_state)(nvmlDevice_t device, unsigned int link, int *is_active); /* ..GetNvLinkState */
  nvmlReturn_t (*nvlink_error_counter)(nvmlDevice_t device, unsigned int link, int counter,
                                       unsigned long long *value); /* nvmlDeviceGetNvLinkErrorCounter */
  nvmlReturn_t (*event_set_create)(nvmlEventSet_t *set);                       /* nvmlEventSetCreate */
  nvmlReturn_t (*register_events)(nvmlDevice_t device, unsigned long long types, nvmlEventSet_t set);
  nvmlReturn_t (*event_set_wait)(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeout_ms);
  nvmlReturn_t (*event_set_free)(nvmlEventSet_t set); /* nvmlEventSetFree */
} ln_nvml_ops;

/* The NVML names of the calls above, in the table's order (for the fake's "fail" lists and for
 * messages). LN_NVML_CALLS is their number. */
#define LN_NVML_CALLS 22
extern const char *const ln_nvml_call_names[LN_NVML_CALLS];
/* The index of an NVML call name in ln_nvml_call_names, or -1. */
int ln_nvml_call_index(const char *name);

/* Fills *ops with the table this process uses: the fake when FTL_NVML_FAKE names a file, else
 * libnvidia-ml.so.1. 1 when it is there; 0 (ops zeroed) with the reason in why when not: no
 * library, a required symbol missing, or a fake file that cannot be read. Never an error: no
 * NVML is an ordinary state of a CPU host. Not thread-safe the first time (call it from one
 * thread before sampling). */
int ln_nvml_load(ln_nvml_ops *ops, char *why, size_t why_size);

/* ---- The fake (launcher/nvml_fake.c) -------------------------------------------------------- */

/* Parses a fake's JSON document (docs/formats/nvml-fake.md) and makes it the fake's state,
 * replacing any earlier one; *ops gets the fake table, *missing whether the file says the
 * library is missing. FTL_ERR_CORRUPT (naming the field) for a document that breaks the format,
 * FTL_ERR_NOMEM. The fake is process-wide and not thread-safe: for tests and the fuzzer. */
ftl_err ln_nvml_fake_parse(const char *data, size_t size, ln_nvml_ops *ops, int *missing, ftl_diag *d);
/* Reads PATH through core_fs_read_regular (at most LN_NVML_FAKE_MAX_BYTES) and parses it. */
#define LN_NVML_FAKE_MAX_BYTES (1u << 20)
ftl_err ln_nvml_fake_load(const char *path, ln_nvml_ops *ops, int *missing, ftl_diag *d);
/* Frees the fake's state (idempotent). */
void ln_nvml_fake_reset(void);

#endif
