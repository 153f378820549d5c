/* tests/launcher/test_gpu_health.c: the NVML seam's fake, the GPU health sampler and the verdict
 * (launcher/nvml_fake.c, launcher/gpu_health.c), end to end through FTL_NVML_FAKE: each case
 * writes a recorded device history, samples it pass by pass as the rank agent will, and judges
 * each reading against the one before. No GPU or NVML library is needed. */
#include <stdlib.h>
#include <unistd.h>

#include "ftl_test.h"
#include "launcher/gpu_health.h"
#include "launcher/nvml_seam.h"

static char fake_path[256];

static void use_fake(const char *json) {
  FILE *f = fopen(fake_path, "w");
  CHECK(f != NULL);
  fputs(json, f);
  CHECK(fclose(f) == 0);
  CHECK(setenv("FTL_NVML_FAKE", fake_path, 1) == 0);
}

/* Samples `passes` times and returns the verdict of the last pass on GPU 0, each pass judged
 * against the one before (the first against nothing). *last gets the last reading. */
static ln_gpu_verdict sample(int passes, ln_gpu_reading *last) {
  ln_gpu_sampler *s = NULL;
  ftl_diag d = {{0}};
  CHECK_OK(ln_gpu_sampler_open(&s, &d), d.msg);
  if (!ln_gpu_sampler_available(s)) FTL_TEST_FAIL_("not available: %s", ln_gpu_sampler_why(s));
  ln_gpu_reading prev, cur;
  ln_gpu_verdict v = {LN_GPU_HEALTHY, ""};
  for (int p = 0; p < passes; p++) {
    int n = 0;
    ln_gpu_sampler_read(s, &cur, 1, &n);
    CHECK_INT_EQ(n, 1);
    ln_gpu_verdict_of(p ? &prev : NULL, &cur, NULL, &v);
    prev = cur;
  }
  if (last) *last = cur;
  ln_gpu_sampler_close(s);
  return v;
}

#define H100 "\"name\":\"NVIDIA H100 80GB HBM3\",\"uuid\":\"GPU-1111\",\"pci_bus_id\":\"00000000:18:00.0\""

static void test_healthy_stays_healthy(void) {
  use_fake("{\"version\":1,\"devices\":[{\"readings\":[{" H100
           ",\"temperature_c\":45,\"power_mw\":350000,\"ecc\":{\"corrected_volatile\":2},"
           "\"nvlink\":[{},{},{}]},{\"temperature_c\":61},{\"ecc\":{\"corrected_volatile\":3}}]}]}");
  ln_gpu_reading r;
  ln_gpu_verdict v = sample(5, &r);
  CHECK_INT_EQ(v.kind, LN_GPU_HEALTHY);
  CHECK_STR_EQ(v.reason, "healthy");
  CHECK_STR_EQ(r.uuid, "GPU-1111");
  CHECK_STR_EQ(r.name, "NVIDIA H100 80GB HBM3");
  CHECK_STR_EQ(r.pci_bus_id, "00000000:18:00.0");
  CHECK_INT_EQ(r.temperature_c, 61);
  CHECK_INT_EQ(r.power_mw, 350000);
  CHECK_INT_EQ(r.nvlink_active_links, 3);
  CHECK_INT_EQ(r.ecc_corrected_volatile, 3);
  for (int f = 0; f < LN_GPU_FIELDS; f++)
    if (r.state[f] != LN_GPU_KNOWN) FTL_TEST_FAIL_("field %s not known", ln_gpu_field_name((ln_gpu_field)f));
}

static void test_corrected_ecc_climbing(void) {
  use_fake("{\"version\":1,\"devices\":[{\"readings\":[{\"ecc\":{\"corrected_volatile\":5}},"
           "{\"ecc\":{\"corrected_volatile\":9}},{\"ecc\":{\"corrected_volatile\":40}}]}]}");
  CHECK_INT_EQ(sample(2, NULL).kind, LN_GPU_HEALTHY); /* +4: below the threshold of 10 */
  ln_gpu_verdict v = sample(3, NULL);
  CHECK_INT_EQ(v.kind, LN_GPU_DEGRADED);
  CHECK_STR_CONTAINS(v.reason, "corrected ECC errors rising (+31");
}

static void test_thermal_throttling_mid_run(void) {
  use_fake("{\"version\":1,\"devices\":[{\"readings\":[{\"temperature_c\":60},{\"temperature_c\":70},"
           "{\"temperature_c\":91,\"throttle\":[\"hw_thermal\"]}]}]}");
  CHECK_INT_EQ(sample(2, NULL).kind, LN_GPU_HEALTHY);
  ln_gpu_reading r;
  ln_gpu_verdict v = sample(3, &r);
  CHECK_INT_EQ(v.kind, LN_GPU_DEGRADED);
  CHECK_STR_EQ(v.reason, "thermal throttling");
  CHECK_INT_EQ(r.temperature_c, 91);
  /* The SW power cap alone is a GPU at full load under its limit: healthy by default (and
   * degraded when a caller's mask asks for it); the HW power brake and HW slowdown, given as NVML's
   * bits (0x80 | 0x8), are not. */
  use_fake("{\"version\":1,\"devices\":[{\"readings\":[{\"throttle\":[\"sw_power_cap\"]}]}]}");
  CHECK_INT_EQ(sample(1, NULL).kind, LN_GPU_HEALTHY);
  use_fake("{\"version\":1,\"devices\":[{\"readings\":[{\"throttle\":[\"sw_power_cap\"]}]}]}");
  {
    ln_gpu_sampler *s = NULL;
    ftl_diag d = {{0}};
    CHECK_INT_EQ(ln_gpu_sampler_open(&s, &d), FTL_OK);
    ln_gpu_reading cur;
    int n = 0;
    ln_gpu_sampler_read(s, &cur, 1, &n);
    ln_gpu_health_limits strict = ln_gpu_health_limits_default();
    strict.throttle_mask |= 0x4; /* nvmlClocksThrottleReasonSwPowerCap */
    ln_gpu_verdict_of(NULL, &cur, &strict, &v);
    CHECK_INT_EQ(v.kind, LN_GPU_DEGRADED);
    CHECK_STR_EQ(v.reason, "power-cap throttling");
    ln_gpu_sampler_close(s);
  }
  use_fake("{\"version\":1,\"devices\":[{\"readings\":[{\"throttle\":136}]}]}");
  v = sample(1, NULL);
  CHECK_INT_EQ(v.kind, LN_GPU_DEGRADED);
  CHECK_STR_EQ(v.reason, "HW power brake; HW slowdown");
}

static void test_uncorrectable_ecc(void) {
  use_fake("{\"version\":1,\"devices\":[{\"readings\":[{},{\"ecc\":{\"uncorrected_volatile\":1,"
           "\"uncorrected_aggregate\":1,\"corrected_volatile\":50}}]}]}");
  ln_gpu_verdict v = sample(2, NULL);
  CHECK_INT_EQ(v.kind, LN_GPU_FAILED);
  CHECK_STR_EQ(v.reason, "new uncorrectable ECC error (1 since the last reading)");
  /* Before an attempt (no previous reading), a volatile uncorrectable count fails the GPU. */
  use_fake("{\"version\":1,\"devices\":[{\"readings\":[{\"ecc\":{\"uncorrected_volatile\":2}}]}]}");
  v = sample(1, NULL);
  CHECK_INT_EQ(v.kind, LN_GPU_FAILED);
  CHECK_STR_CONTAINS(v.reason, "2 uncorrectable ECC errors since the driver loaded");
}

static void test_row_remap(void) {
  use_fake("{\"version\":1,\"devices\":[{\"readings\":[{},{\"remapped_rows\":{\"pending\":true,\"corrected\":1}},"
           "{\"remapped_rows\":{\"failure\":true}}]}]}");
  ln_gpu_verdict v = sample(2, NULL);
  CHECK_INT_EQ(v.kind, LN_GPU_DEGRADED);
  CHECK_STR_CONTAINS(v.reason, "row remap pending");
  v = sample(3, NULL);
  CHECK_INT_EQ(v.kind, LN_GPU_FAILED);
  CHECK_STR_EQ(v.reason, "row remapping failed");
}

static void test_critical_xid(void) {
  use_fake("{\"version\":1,\"devices\":[{\"readings\":[{},{\"xids\":[13,79]},{}]},{\"readings\":[{}]}]}");
  ln_gpu_sampler *s = NULL;
  ftl_diag d = {{0}};
  CHECK_OK(ln_gpu_sampler_open(&s, &d), d.msg);
  CHECK_INT_EQ(ln_gpu_sampler_count(s), 2);
  ln_gpu_reading r[3][2];
  int n = 0;
  for (int p = 0; p < 3; p++) {
    ln_gpu_sampler_read(s, r[p], 2, &n);
    CHECK_INT_EQ(n, 2);
  }
  ln_gpu_sampler_close(s);
  CHECK_INT_EQ(r[1][0].xid_count, 2);
  CHECK_INT_EQ(r[1][1].xid_count, 0);
  ln_gpu_verdict v;
  ln_gpu_verdict_of(&r[0][0], &r[1][0], NULL, &v);
  CHECK_INT_EQ(v.kind, LN_GPU_FAILED);
  CHECK_STR_EQ(v.reason, "critical XID 79"); /* 13 is the program's own fault */
  /* Drained once: the next pass has none, and the other GPU never had any. */
  CHECK_INT_EQ(r[2][0].xid_count, 0);
  ln_gpu_verdict_of(&r[1][0], &r[2][0], NULL, &v);
  CHECK_INT_EQ(v.kind, LN_GPU_HEALTHY);
  ln_gpu_verdict_of(&r[0][1], &r[1][1], NULL, &v);
  CHECK_INT_EQ(v.kind, LN_GPU_HEALTHY);
  CHECK(ln_gpu_xid_is_critical(48) && ln_gpu_xid_is_critical(95) && !ln_gpu_xid_is_critical(13));
  /* 63: a row marked for remapping, degraded. */
  use_fake("{\"version\":1,\"devices\":[{\"readings\":[{\"xids\":[63]}]}]}");
  v = sample(1, NULL);
  CHECK_INT_EQ(v.kind, LN_GPU_DEGRADED);
  CHECK_STR_EQ(v.reason, "XID 63");
}

static void test_nvlink_growing(void) {
  use_fake("{\"version\":1,\"devices\":[{\"readings\":[{\"nvlink\":[{\"crc_flit\":3},{}]},"
           "{\"nvlink\":[{\"crc_flit\":5},{\"replay\":2}]},"
           "{\"nvlink\":[{\"crc_flit\":15,\"crc_data\":4},{\"replay\":6}]}]}]}");
  CHECK_INT_EQ(sample(2, NULL).kind, LN_GPU_HEALTHY); /* +4 */
  ln_gpu_reading r;
  ln_gpu_verdict v = sample(3, &r);
  CHECK_INT_EQ(v.kind, LN_GPU_DEGRADED); /* +18 */
  CHECK_STR_CONTAINS(v.reason, "NVLink errors growing (+18 CRC/replay");
  CHECK_INT_EQ(r.nvlink_crc_errors, 19);
  CHECK_INT_EQ(r.nvlink_replay_errors, 6);
  /* No NVLink at all (a PCIe card): unsupported, not a failure. */
  use_fake("{\"version\":1,\"devices\":[{\"readings\":[{}]}]}");
  CHECK_INT_EQ(sample(2, &r).kind, LN_GPU_HEALTHY);
  CHECK_INT_EQ(r.state[LN_GPU_FIELD_NVLINK], LN_GPU_UNSUPPORTED);
}

static void test_pcie_replays_growing(void) {
  use_fake("{\"version\":1,\"devices\":[{\"readings\":[{\"pcie_replay\":100},{\"pcie_replay\":103},"
           "{\"pcie_replay\":140}]}]}");
  CHECK_INT_EQ(sample(2, NULL).kind, LN_GPU_HEALTHY);
  ln_gpu_verdict v = sample(3, NULL);
  CHECK_INT_EQ(v.kind, LN_GPU_DEGRADED);
  CHECK_STR_EQ(v.reason, "PCIe replays growing (+37 since the last reading)");
}

static void test_retired_pages_pending(void) {
  use_fake("{\"version\":1,\"devices\":[{\"readings\":[{\"retired_pages\":{\"single_bit\":2,\"double_bit\":1,"
           "\"pending\":true}}]}]}");
  ln_gpu_reading r;
  ln_gpu_verdict v = sample(1, &r);
  CHECK_INT_EQ(v.kind, LN_GPU_DEGRADED);
  CHECK_STR_CONTAINS(v.reason, "retired pages pending");
  CHECK_INT_EQ(r.retired_pages_single_bit, 2);
  CHECK_INT_EQ(r.retired_pages_double_bit, 1);
}

static void test_nvml_missing(void) {
  use_fake("{\"version\":1,\"missing\":true}");
  ln_gpu_sampler *s = NULL;
  ftl_diag d = {{0}};
  CHECK_OK(ln_gpu_sampler_open(&s, &d), d.msg);
  CHECK(!ln_gpu_sampler_available(s));
  CHECK_STR_CONTAINS(ln_gpu_sampler_why(s), "libnvidia-ml.so.1");
  ln_gpu_reading r;
  int n = -1;
  ln_gpu_sampler_read(s, &r, 1, &n);
  CHECK_INT_EQ(n, 0);
  ln_gpu_sampler_close(s);
  /* The driver not loaded, and no GPU: not available either, each with its reason. */
  use_fake("{\"version\":1,\"init_error\":9}");
  CHECK_OK(ln_gpu_sampler_open(&s, &d), d.msg);
  CHECK(!ln_gpu_sampler_available(s));
  CHECK_STR_CONTAINS(ln_gpu_sampler_why(s), "nvmlInit_v2: Driver Not Loaded (9)");
  ln_gpu_sampler_close(s);
  use_fake("{\"version\":1,\"devices\":[]}");
  CHECK_OK(ln_gpu_sampler_open(&s, &d), d.msg);
  CHECK(!ln_gpu_sampler_available(s));
  CHECK_STR_CONTAINS(ln_gpu_sampler_why(s), "no GPU");
  ln_gpu_sampler_close(s);
  /* A broken fake file: not available, naming it, never an error. */
  use_fake("{\"version\":1,\"devices\":[{\"readings\":[{\"fail\":[\"nvmlNoSuchCall\"]}]}]}");
  CHECK_OK(ln_gpu_sampler_open(&s, &d), d.msg);
  CHECK(!ln_gpu_sampler_available(s));
  CHECK_STR_CONTAINS(ln_gpu_sampler_why(s), "devices[0].readings[0].fail[0]: not an NVML call ftl makes");
  ln_gpu_sampler_close(s);
  /* The real library, with the fake off: on this CPU machine it is absent; on a GPU host it
   * answers. Either way the call returns and says which. */
  CHECK(unsetenv("FTL_NVML_FAKE") == 0);
  CHECK_OK(ln_gpu_sampler_open(&s, &d), d.msg);
  if (!ln_gpu_sampler_available(s)) CHECK(ln_gpu_sampler_why(s)[0] != '\0');
  ln_gpu_sampler_close(s);
}

/* Every device call fails in turn (in the middle reading): its field is unknown or unsupported,
 * the others are still read, and the verdict is made on what is known. */
static void test_each_call_failing(void) {
  static const struct {
    const char *call;
    ln_gpu_field field;
  } cases[] = {
      {"nvmlDeviceGetUUID", LN_GPU_FIELD_UUID},
      {"nvmlDeviceGetName", LN_GPU_FIELD_NAME},
      {"nvmlDeviceGetPciInfo_v3", LN_GPU_FIELD_PCI},
      {"nvmlDeviceGetTotalEccErrors", LN_GPU_FIELD_ECC},
      {"nvmlDeviceGetRetiredPages", LN_GPU_FIELD_RETIRED_PAGES},
      {"nvmlDeviceGetRetiredPagesPendingStatus", LN_GPU_FIELD_RETIRED_PENDING},
      {"nvmlDeviceGetRemappedRows", LN_GPU_FIELD_REMAPPED_ROWS},
      {"nvmlDeviceGetCurrentClocksThrottleReasons", LN_GPU_FIELD_THROTTLE},
      {"nvmlDeviceGetTemperature", LN_GPU_FIELD_TEMPERATURE},
      {"nvmlDeviceGetPowerUsage", LN_GPU_FIELD_POWER},
      {"nvmlDeviceGetPcieReplayCounter", LN_GPU_FIELD_PCIE_REPLAY},
      {"nvmlDeviceGetNvLinkState", LN_GPU_FIELD_NVLINK},
      {"nvmlDeviceGetNvLinkErrorCounter", LN_GPU_FIELD_NVLINK},
      {"nvmlEventSetWait_v2", LN_GPU_FIELD_XID},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int unsupported = 0; unsupported < 2; unsupported++) {
      char json[1024];
      const char *how = unsupported ? "unsupported" : "fail";
      /* The event wait is not a device call: it fails for the whole document. */
      if (cases[c].field == LN_GPU_FIELD_XID)
        snprintf(json, sizeof json,
                 "{\"version\":1,\"%s\":[\"%s\"],\"devices\":[{\"readings\":[{\"nvlink\":[{}],\"xids\":[79]}]}]}",
                 how, cases[c].call);
      else
        snprintf(json, sizeof json,
                 "{\"version\":1,\"devices\":[{\"readings\":[{\"nvlink\":[{}]},{\"%s\":[\"%s\"],"
                 "\"throttle\":[\"sw_thermal\"]},{}]}]}",
                 how, cases[c].call);
      use_fake(json);
      ln_gpu_sampler *s = NULL;
      ftl_diag d = {{0}};
      CHECK_OK(ln_gpu_sampler_open(&s, &d), d.msg);
      ln_gpu_reading r[3];
      int n = 0, passes = cases[c].field == LN_GPU_FIELD_XID ? 1 : 3;
      for (int p = 0; p < passes; p++) {
        ln_gpu_sampler_read(s, &r[p], 1, &n);
        CHECK_INT_EQ(n, 1);
      }
      ln_gpu_sampler_close(s);
      const ln_gpu_reading *mid = &r[passes == 1 ? 0 : 1];
      int want = unsupported ? LN_GPU_UNSUPPORTED : LN_GPU_UNKNOWN;
      if (mid->state[cases[c].field] != want)
        FTL_TEST_FAIL_("%s %s: field %s state %d, want %d", how, cases[c].call, ln_gpu_field_name(cases[c].field),
                       mid->state[cases[c].field], want);
      for (int f = 0; f < LN_GPU_FIELDS; f++)
        if (f != (int)cases[c].field && mid->state[f] != LN_GPU_KNOWN)
          FTL_TEST_FAIL_("%s %s: field %s also lost", how, cases[c].call, ln_gpu_field_name((ln_gpu_field)f));
      ln_gpu_verdict v;
      if (passes == 3) {
        ln_gpu_verdict_of(&r[0], &r[1], NULL, &v);
        /* Thermal throttling is still seen unless the throttle call itself is the one failing. */
        CHECK_INT_EQ(v.kind, cases[c].field == LN_GPU_FIELD_THROTTLE ? LN_GPU_HEALTHY : LN_GPU_DEGRADED);
        ln_gpu_verdict_of(&r[1], &r[2], NULL, &v); /* the next reading is whole again */
        for (int f = 0; f < LN_GPU_FIELDS; f++) CHECK_INT_EQ(r[2].state[f], LN_GPU_KNOWN);
      } else {
        ln_gpu_verdict_of(NULL, mid, NULL, &v);
        CHECK_INT_EQ(v.kind, LN_GPU_HEALTHY); /* the XID was never delivered */
      }
    }
  /* The handle itself failing: every field of that GPU unknown, no crash. */
  use_fake("{\"version\":1,\"devices\":[{\"readings\":[{\"fail\":[\"nvmlDeviceGetHandleByIndex_v2\"]}]}]}");
  ln_gpu_reading r;
  ln_gpu_verdict v = sample(1, &r);
  CHECK_INT_EQ(v.kind, LN_GPU_HEALTHY);
  for (int f = 0; f < LN_GPU_FIELDS; f++) CHECK_INT_EQ(r.state[f], LN_GPU_UNKNOWN);
}

static void test_fake_refusals(void) {
  static const char *const bad[] = {
      "",
      "[]",
      "{\"version\":2}",
      "{\"version\":1,\"devices\":{}}",
      "{\"version\":1,\"devices\":[{\"readings\":[]}]}",
      "{\"version\":1,\"devices\":[{\"readings\":[{\"ecc\":{\"corrected_volatile\":-1}}]}]}",
      "{\"version\":1,\"devices\":[{\"readings\":[{\"throttle\":[\"too_hot\"]}]}]}",
      "{\"version\":1,\"devices\":[{\"readings\":[{\"xids\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}]}]}",
      "{\"version\":1,\"version\":1}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ln_nvml_ops ops;
    int missing = 0;
    ftl_diag d = {{0}};
    int rc = ln_nvml_fake_parse(bad[i], strlen(bad[i]), &ops, &missing, &d);
    if (rc != FTL_ERR_CORRUPT) FTL_TEST_FAIL_("accepted %s (%d)", bad[i], rc);
    CHECK(ops.init == NULL);
  }
  ln_nvml_fake_reset();
}

int main(void) {
  snprintf(fake_path, sizeof fake_path, "/tmp/ftl-test-nvml-%d.json", (int)getpid());
  test_healthy_stays_healthy();
  test_corrected_ecc_climbing();
  test_thermal_throttling_mid_run();
  test_uncorrectable_ecc();
  test_row_remap();
  test_critical_xid();
  test_nvlink_growing();
  test_pcie_replays_growing();
  test_retired_pages_pending();
  test_each_call_failing();
  test_fake_refusals();
  test_nvml_missing();
  unlink(fake_path);
  ln_nvml_fake_reset();
  printf("test_gpu_health: ok\n");
  return 0;
}
