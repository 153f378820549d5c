/* launcher/peak_flops.h: a device's peak FLOPS, the denominator of model FLOPs utilisation
 * (docs/gpu.md, "Useful work: MFU"): NVIDIA's dense (no sparsity) peaks per GPU model and
 * precision, looked up by the name NVML gives, and for a rank without a GPU a measured one: a
 * single-threaded FP32 GEMM timed for about a second, once per launcher process, in a thread of
 * its own so the launcher's loop never waits for it.
 *
 * Not here: which device a rank uses and the gang's sum (mfu.c), reading NVML (nvml_seam.c). */
#ifndef FTL_LAUNCHER_PEAK_FLOPS_H
#define FTL_LAUNCHER_PEAK_FLOPS_H

#include <stdint.h>

#include "ftl/error.h"

/* The column of the table: the precision the program's matrix multiplies run in. */
typedef enum ln_precision {
  LN_PREC_BF16 = 0, /* the default: mixed-precision training */
  LN_PREC_FP16 = 1,
  LN_PREC_TF32 = 2,
  LN_PREC_FP32 = 3,
  LN_PREC_COUNT = 4,
} ln_precision;

/* "bf16", "fp16", "tf32", "fp32". */
const char *ln_precision_name(ln_precision p);

/* A GPU's peak for a precision. FTL_OK with *flops (FLOP/s) and *model (the table's row, e.g.
 * "H100 SXM"); FTL_ERR_NOTFOUND when no row matches name; FTL_ERR_UNSUPPORTED when the row has no
 * peak for that precision (a T4's bf16). Rows are tried in the table's order (docs/gpu.md, "Peak
 * FLOPS table"); a row's key matches where name holds it as a whole word ("NVIDIA A10" is not an
 * "A100", "NVIDIA GH200 480GB" not an "H200"). */
ftl_err ln_peak_lookup(const char *name, ln_precision prec, double *flops, const char **model);

/* The table's rows, for `ftl help` and the tests: row i's key, model and peaks (0: none), or
 * FTL_ERR_NOTFOUND past the last. */
ftl_err ln_peak_row(int i, const char **key, const char **model, double peaks[LN_PREC_COUNT]);

/* The measured CPU peak: FP32 FLOP/s of one core running ftl's own blocked GEMM (-O2, no BLAS).
 * ln_cpu_peak_start begins the measurement in a thread the first time (later calls do nothing);
 * ln_cpu_peak_get returns 1 and *flops once it is done (0 while it runs or before it started).
 * ln_cpu_peak_wait waits for it until deadline_ms (ftl_clock_ms), for an attempt's final figure.
 * A measurement that could not run (no thread) gives 0 FLOP/s: the peak is then unknown. */
void ln_cpu_peak_start(void);
int ln_cpu_peak_get(double *flops);
int ln_cpu_peak_wait(int64_t deadline_ms, double *flops);

/* The kernel itself, timed for about budget_ms on the calling thread: its best rate in FLOP/s.
 * (What the thread runs; the tests call it directly.) */
double ln_cpu_gemm_rate(int64_t budget_ms);

#endif
