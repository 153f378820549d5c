/* tests/launcher/test_mfu.c: model FLOPs utilisation's pure parts (docs/gpu.md, "Useful work: MFU"):
 * the peak table's lookup by NVML's name (whole words, the more specific row first, a precision a
 * model lacks), the gang's figure from the ranks' reports (exact totals, the recent window against
 * the whole training time, each rank's own GPU, an unknown GPU never guessed, a report out of order
 * ignored), the `mfu` event read back, a run's sum, the sentence, the CPU GEMM, and the API's
 * refusal of a bad FLOPs count (ftl_step_done_flops). */
#include <math.h>

#include "ftl/ftl.h"
#include "ftl_test.h"
#include "launcher/mfu.h"
#include "launcher/peak_flops.h"

#define CHECK_NEAR(a, b)                                                                         \
  do {                                                                                           \
    double a_ = (a), b_ = (b);                                                                   \
    if (!(fabs(a_ - b_) <= 1e-9 * fabs(b_) + 1e-12)) FTL_TEST_FAIL_("%s == %s (%.17g != %.17g)", #a, #b, a_, b_); \
  } while (0)

static double peak(const char *name, ln_precision p, ftl_err want) {
  double f = -1;
  const char *model = NULL;
  ftl_err rc = ln_peak_lookup(name, p, &f, &model);
  if (rc != want) FTL_TEST_FAIL_("'%s' %s: rc %d, expected %d", name, ln_precision_name(p), (int)rc, (int)want);
  return f;
}

static void table(void) {
  CHECK_NEAR(peak("NVIDIA H100 80GB HBM3", LN_PREC_BF16, FTL_OK), 989.4e12);
  CHECK_NEAR(peak("NVIDIA H100 80GB HBM3", LN_PREC_FP32, FTL_OK), 66.9e12);
  CHECK_NEAR(peak("NVIDIA H100 PCIe", LN_PREC_BF16, FTL_OK), 756.5e12);
  CHECK_NEAR(peak("NVIDIA H100 NVL", LN_PREC_FP16, FTL_OK), 835.5e12);
  CHECK_NEAR(peak("NVIDIA H200", LN_PREC_BF16, FTL_OK), 989.4e12);
  CHECK_NEAR(peak("NVIDIA H200 NVL", LN_PREC_BF16, FTL_OK), 835.5e12);
  CHECK_NEAR(peak("NVIDIA GH200 480GB", LN_PREC_TF32, FTL_OK), 494.7e12);
  CHECK_NEAR(peak("NVIDIA A100-SXM4-80GB", LN_PREC_BF16, FTL_OK), 312e12);
  CHECK_NEAR(peak("NVIDIA A100-PCIE-40GB", LN_PREC_TF32, FTL_OK), 156e12);
  CHECK_NEAR(peak("NVIDIA A100 80GB PCIe", LN_PREC_BF16, FTL_OK), 312e12);
  CHECK_NEAR(peak("NVIDIA L40S", LN_PREC_BF16, FTL_OK), 362.05e12);
  CHECK_NEAR(peak("NVIDIA L40", LN_PREC_BF16, FTL_OK), 181.05e12);
  CHECK_NEAR(peak("NVIDIA L4", LN_PREC_BF16, FTL_OK), 121e12);
  CHECK_NEAR(peak("NVIDIA A10", LN_PREC_BF16, FTL_OK), 125e12);
  CHECK_NEAR(peak("Tesla V100-SXM2-32GB", LN_PREC_FP16, FTL_OK), 125e12);
  CHECK_NEAR(peak("Tesla V100-PCIE-16GB", LN_PREC_FP16, FTL_OK), 112e12);
  CHECK_NEAR(peak("Tesla T4", LN_PREC_FP16, FTL_OK), 65e12);
  /* Whole words: an A10G is no A10, nor an A100; a name with none of the keys is not a guess. */
  peak("NVIDIA A10G", LN_PREC_BF16, FTL_ERR_NOTFOUND);
  peak("fake GPU", LN_PREC_BF16, FTL_ERR_NOTFOUND);
  peak("", LN_PREC_BF16, FTL_ERR_NOTFOUND);
  /* A row without the precision: Turing and Volta have no BF16. */
  peak("Tesla T4", LN_PREC_BF16, FTL_ERR_UNSUPPORTED);
  const char *key, *model;
  double peaks[LN_PREC_COUNT];
  int rows = 0;
  while (ln_peak_row(rows, &key, &model, peaks) == FTL_OK) rows++;
  CHECK(rows >= 15);
}

static json_t *report(double flops, double ms) { return json_pack("{s:s, s:f, s:f}", "type", "step", "flops", flops, "flops_ms", ms); }

static void note(ln_mfu *m, int rank, double flops, double ms) {
  json_t *msg = report(flops, ms);
  ln_mfu_note_flops(m, rank, msg);
  json_decref(msg);
}

/* Two ranks on one host, 10 TFLOPS each by the job spec: the totals, rates and MFU exactly. */
static void spec_peak(void) {
  ln_mfu *m = NULL;
  ftl_diag d;
  ln_mfu_opts o = {.precision = LN_PREC_BF16, .peak_tflops = 10};
  CHECK(ln_mfu_create(2, &o, &m, &d) == FTL_OK);
  ln_mfu_figure f;
  ln_mfu_compute(m, &f);
  CHECK_INT_EQ(f.ranks, 0);
  CHECK(!ln_mfu_any(m));
  json_t *none = json_pack("{s:s, s:i}", "type", "step", "step", 3); /* a heartbeat without FLOPs */
  ln_mfu_note_flops(m, 0, none);
  json_decref(none);
  CHECK(!ln_mfu_any(m));
  ln_mfu_note_rank(m, 0, "h", 0, 4);
  ln_mfu_note_rank(m, 1, "h", 1, 4);
  note(m, 0, 1e12, 1000);
  note(m, 1, 2e12, 1000);
  ln_mfu_compute(m, &f);
  CHECK_INT_EQ(f.ranks, 2);
  CHECK_NEAR(f.model_flops, 3e12);
  CHECK(f.flops_per_s < 0 && f.mfu < 0); /* one report a rank: no rate yet */
  note(m, 0, 3e12, 2000);
  note(m, 1, 4e12, 2000);
  note(m, 1, 3.5e12, 2500); /* older than its last: ignored */
  ln_mfu_compute(m, &f);
  CHECK_NEAR(f.model_flops, 7e12);
  CHECK_NEAR(f.train_flops, 4e12);
  CHECK_NEAR(f.avg_flops_per_s, 4e12);
  CHECK_NEAR(f.flops_per_s, 4e12);
  CHECK_NEAR(f.train_s, 1);
  CHECK_INT_EQ(f.source, LN_PEAK_SPEC);
  CHECK_NEAR(f.peak_flops, 20e12);
  CHECK_NEAR(f.mfu, 0.2);
  CHECK_NEAR(f.avg_mfu, 0.2);
  CHECK_STR_CONTAINS(f.peak, "mfu.peak_tflops 10 per rank × 2 ranks");
  /* The event and back. */
  json_t *ev = ln_mfu_event_fields(&f, 1);
  ln_mfu_figure g;
  int final = 0;
  ln_mfu_figure_from_event(ev, &g, &final);
  json_decref(ev);
  CHECK(final);
  CHECK_INT_EQ(g.ranks, 2);
  CHECK_NEAR(g.mfu, 0.2);
  CHECK_NEAR(g.peak_flops, 20e12);
  CHECK_INT_EQ(g.source, LN_PEAK_SPEC);
  CHECK_STR_EQ(g.peak, f.peak);
  /* A run of two such attempts, one of them twice as long: FLOPs over peak-seconds. */
  ln_mfu_run run;
  ln_mfu_run_init(&run);
  ln_mfu_run_add(&run, &g);
  g.train_s = 2;
  g.train_flops = 4e12; /* half the rate: MFU 0.1 */
  ln_mfu_run_add(&run, &g);
  CHECK(run.reported);
  CHECK_NEAR(run.mfu, 8e12 / (20e12 * 3));
  char text[400];
  ln_mfu_phrase(text, sizeof text, 90, run.mfu, run.source, run.peak);
  CHECK_STR_CONTAINS(text, "goodput 90.0% × MFU 13.3% = useful work 12.0% (MFU of the job spec's peak");
  ln_mfu_phrase(text, sizeof text, -1, 0.25, LN_PEAK_CPU, "a measured CPU GEMM peak (x)");
  CHECK_STR_EQ(text, "MFU 25.0% of a measured CPU GEMM peak (x)");
  ln_mfu_destroy(m);
}

/* The recent window against the whole training time: 30 s at 1 GFLOP/s, then 30 s at 3. */
static void window(void) {
  ln_mfu *m = NULL;
  ftl_diag d;
  ln_mfu_opts o = {.peak_tflops = 0.01};
  CHECK(ln_mfu_create(1, &o, &m, &d) == FTL_OK);
  ln_mfu_note_rank(m, 0, "h", 0, 1);
  double total = 0;
  for (int s = 0; s <= 60; s++) {
    if (s > 0) total += s <= 30 ? 1e9 : 3e9;
    note(m, 0, total, s * 1000.0);
  }
  ln_mfu_figure f;
  ln_mfu_compute(m, &f);
  CHECK_NEAR(f.flops_per_s, 3e9);
  CHECK_NEAR(f.window_s, 30);
  CHECK_NEAR(f.avg_flops_per_s, 2e9);
  CHECK_NEAR(f.mfu, 0.3);
  CHECK_NEAR(f.avg_mfu, 0.2);
  ln_mfu_destroy(m);
}

/* GPUs from the hosts' reports: each rank's own (local rank mod the host's GPUs), by the table;
 * a name the table lacks makes the whole gang's MFU unknown, with the name. */
static void gpus(void) {
  ln_mfu *m = NULL;
  ftl_diag d;
  ln_mfu_opts o = {.precision = LN_PREC_BF16};
  CHECK(ln_mfu_create(3, &o, &m, &d) == FTL_OK);
  json_t *a = json_pack("[{s:i, s:s}, {s:i, s:s}]", "index", 0, "name", "NVIDIA H100 80GB HBM3", "index", 1, "name",
                        "NVIDIA A100-SXM4-80GB");
  json_t *b = json_pack("[{s:i, s:s}]", "index", 0, "name", "Acme Tensor 9000");
  ln_mfu_note_gpus(m, "a", a);
  ln_mfu_note_rank(m, 0, "a", 0, 8);
  ln_mfu_note_rank(m, 1, "a", 1, 8);
  note(m, 0, 1e15, 1000);
  note(m, 0, 2e15, 2000);
  ln_mfu_figure f;
  ln_mfu_compute(m, &f);
  CHECK_INT_EQ(f.source, LN_PEAK_TABLE);
  CHECK_NEAR(f.peak_flops, 989.4e12 + 312e12);
  CHECK_NEAR(f.mfu, 1e15 / (989.4e12 + 312e12));
  ln_mfu_note_gpus(m, "b", b);
  ln_mfu_note_rank(m, 2, "b", 0, 8);
  ln_mfu_compute(m, &f);
  CHECK_INT_EQ(f.source, LN_PEAK_UNKNOWN);
  CHECK(f.peak_flops == 0 && f.mfu < 0);
  CHECK_STR_EQ(f.peak, "no peak for 'Acme Tensor 9000'; set mfu.peak_tflops");
  char text[300];
  ln_mfu_phrase(text, sizeof text, 90, f.mfu, f.source, f.peak);
  CHECK_STR_EQ(text, "MFU unknown (no peak for 'Acme Tensor 9000'; set mfu.peak_tflops)");
  json_decref(a);
  json_decref(b);
  ln_mfu_destroy(m);
}

int main(void) {
  table();
  spec_peak();
  window();
  gpus();
  /* The CPU's own GEMM runs and gives a rate. */
  CHECK(ln_cpu_gemm_rate(50) > 1e6);
  /* The API refuses a count that would poison the total, before it needs a context. */
  CHECK_INT_EQ(ftl_step_done_flops(NULL, 1, -1.0), FTL_ERR_INVAL);
  CHECK_INT_EQ(ftl_step_done_flops(NULL, 1, NAN), FTL_ERR_INVAL);
  CHECK_INT_EQ(ftl_step_done_flops(NULL, 1, INFINITY), FTL_ERR_INVAL);
  char rate[48];
  ln_mfu_fmt_rate(rate, sizeof rate, 1.98e15);
  CHECK_STR_EQ(rate, "1.98 PFLOP/s");
  printf("ok\n");
  return 0;
}
