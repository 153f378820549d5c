/* tests/fuzz/fuzz_nvml_fake.c: libFuzzer harness for the fake NVML's document reader
 * (launcher/nvml_fake.c, ln_nvml_fake_parse): FTL_NVML_FAKE names a file anyone may write. Any
 * bytes must be taken or refused as corrupt with a message, never a crash, a leak or a hang;
 * a document that is taken is then sampled twice and judged, so the replay and the verdict see
 * whatever the reader let through. Broken promises trap so the fuzzer keeps the input. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "launcher/gpu_health.h"
#include "launcher/nvml_seam.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int ok) {
  if (!ok) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ln_nvml_ops ops;
  int missing = -1;
  ftl_diag d = {{0}};
  ftl_err rc = ln_nvml_fake_parse((const char *)data, size, &ops, &missing, &d);
  require(rc == FTL_OK || rc == FTL_ERR_CORRUPT || rc == FTL_ERR_NOMEM);
  require(memchr(d.msg, '\0', sizeof d.msg) != NULL);
  if (rc != FTL_OK) {
    require(d.msg[0] != '\0');
    require(ops.init == NULL);
    return 0;
  }
  require(missing == 0 || missing == 1);
  if (!missing && ops.init() == NVML_SUCCESS) {
    unsigned int n = 0;
    if (ops.device_count(&n) == NVML_SUCCESS && n > 0) {
      ln_gpu_reading prev, cur;
      nvmlDevice_t h = NULL;
      /* One device through the table directly, as the sampler would; the sampler itself reads
       * FTL_NVML_FAKE from the environment, which a fuzzer should not touch. */
      memset(&prev, 0, sizeof prev);
      memset(&cur, 0, sizeof cur);
      if (ops.device_handle(0, &h) == NVML_SUCCESS) {
        char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        (void)ops.uuid(h, text, sizeof text);
        unsigned long long v = 0;
        (void)ops.total_ecc_errors(h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &v);
        cur.ecc_uncorrected_volatile = v;
      }
      ln_gpu_verdict verdict;
      ln_gpu_verdict_of(&prev, &cur, NULL, &verdict);
      require(verdict.kind <= LN_GPU_FAILED);
      require(memchr(verdict.reason, '\0', sizeof verdict.reason) != NULL);
    }
    ops.shutdown();
  }
  ln_nvml_fake_reset();
  return 0;
}
