/* launcher/peak_flops.c: the peak FLOPS table of GPU models and the measured CPU peak (see
 * peak_flops.h; the table is documented in docs/gpu.md, "Peak FLOPS table").
 *
 * Built with -O2 whatever the build type (launcher/CMakeLists.txt): the GEMM below is the CPU's
 * peak, and an unoptimised one would understate it several times over. */
#include "launcher/peak_flops.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "ftl/core.h"

/* ---- the table --------------------------------------------------------------------------- */

/* NVIDIA's data sheets, dense Tensor Core peaks (half the "with sparsity" figures), TFLOPS; FP32 is
 * the non-Tensor-Core rate. 0: the model has no such mode (Volta and Turing have no BF16 or TF32).
 * Order matters only where one key could be read inside another's name: the more specific first. */
typedef struct peak_row {
  const char *key;   /* a whole word (or words) of NVML's name */
  const char *model;
  double tflops[LN_PREC_COUNT]; /* bf16, fp16, tf32, fp32 */
} peak_row;

static const peak_row table[] = {
    {"H100 PCIe", "H100 PCIe", {756.5, 756.5, 378.0, 51.2}},
    {"H100 NVL", "H100 NVL", {835.5, 835.5, 417.5, 60.0}},
    {"H100", "H100 SXM", {989.4, 989.4, 494.7, 66.9}},
    {"H200 NVL", "H200 NVL", {835.5, 835.5, 417.5, 60.0}},
    {"H200", "H200 SXM", {989.4, 989.4, 494.7, 66.9}},
    {"GH200", "GH200", {989.4, 989.4, 494.7, 66.9}},
    {"A100", "A100", {312.0, 312.0, 156.0, 19.5}},
    {"A800", "A800", {312.0, 312.0, 156.0, 19.5}},
    {"L40S", "L40S", {362.05, 362.05, 183.0, 91.6}},
    {"L40", "L40", {181.05, 181.05, 90.5, 90.5}},
    {"L4", "L4", {121.0, 121.0, 60.0, 30.3}},
    {"A10", "A10", {125.0, 125.0, 62.5, 31.2}},
    {"A30", "A30", {165.0, 165.0, 82.0, 10.3}},
    {"A40", "A40", {149.7, 149.7, 74.8, 37.4}},
    {"V100-PCIE", "V100 PCIe", {0, 112.0, 0, 14.0}},
    {"V100S", "V100S PCIe", {0, 130.0, 0, 16.4}},
    {"V100", "V100 SXM2", {0, 125.0, 0, 15.7}},
    {"T4", "T4", {0, 65.0, 0, 8.1}},
};
enum { N_ROWS = sizeof table / sizeof *table };

const char *ln_precision_name(ln_precision p) {
  static const char *const names[LN_PREC_COUNT] = {"bf16", "fp16", "tf32", "fp32"};
  return (unsigned)p < LN_PREC_COUNT ? names[p] : "?";
}

static int word_char(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

/* Whether name holds key with no letter or digit just before or after it. */
static int holds_word(const char *name, const char *key) {
  size_t n = strlen(key);
  for (const char *p = strstr(name, key); p; p = strstr(p + 1, key))
    if ((p == name || !word_char(p[-1])) && !word_char(p[n])) return 1;
  return 0;
}

ftl_err ln_peak_lookup(const char *name, ln_precision prec, double *flops, const char **model) {
  *flops = 0;
  if (model) *model = "";
  if (!name || (unsigned)prec >= LN_PREC_COUNT) return FTL_ERR_NOTFOUND;
  for (int i = 0; i < N_ROWS; i++) {
    if (!holds_word(name, table[i].key)) continue;
    if (model) *model = table[i].model;
    if (table[i].tflops[prec] <= 0) return FTL_ERR_UNSUPPORTED;
    *flops = table[i].tflops[prec] * 1e12;
    return FTL_OK;
  }
  return FTL_ERR_NOTFOUND;
}

ftl_err ln_peak_row(int i, const char **key, const char **model, double peaks[LN_PREC_COUNT]) {
  if (i < 0 || i >= N_ROWS) return FTL_ERR_NOTFOUND;
  *key = table[i].key;
  *model = table[i].model;
  for (int p = 0; p < LN_PREC_COUNT; p++)
    peaks[p] = table[i].tflops[p] * 1e12;
  return FTL_OK;
}

/* ---- the measured CPU peak --------------------------------------------------------------- */

/* Square matrices of GEMM_N floats a side (3 x 147 KiB: in a core's L2 on current x86 and ARM
 * servers), multiplied in row blocks of GEMM_BK: C += A B with the inner loop over a row of B and C,
 * whose fixed length lets the compiler vectorise it at -O2 without a scalar remainder. */
#define GEMM_N 192
#define GEMM_BK 64

/* Never instrumented by a sanitizer build: the peak is the CPU's, not instrumented code's (it reads
 * only its own three buffers, so there is nothing for a sanitizer to find). */
__attribute__((no_sanitize("address", "thread", "undefined")))
static void gemm(const float *restrict a, const float *restrict b, float *restrict c) {
  for (int k0 = 0; k0 < GEMM_N; k0 += GEMM_BK)
    for (int i = 0; i < GEMM_N; i++) {
      float *restrict ci = c + (size_t)i * GEMM_N;
      for (int k = k0; k < k0 + GEMM_BK; k++) {
        const float aik = a[(size_t)i * GEMM_N + k];
        const float *restrict bk = b + (size_t)k * GEMM_N;
        for (int j = 0; j < GEMM_N; j++)
          ci[j] += aik * bk[j];
      }
    }
}

double ln_cpu_gemm_rate(int64_t budget_ms) {
  size_t n = (size_t)GEMM_N * GEMM_N;
  float *m = ftl_malloc(3 * n * sizeof(float));
  if (!m) return 0;
  float *a = m, *b = m + n, *c = m + 2 * n;
  for (size_t i = 0; i < n; i++) {
    a[i] = (float)(i % 7) * 0.25f;
    b[i] = (float)(i % 5) * 0.5f;
    c[i] = 0;
  }
  /* The best of rounds of a few multiplies: another process taking the core for a moment (the
   * ranks themselves, on a small host) slows some rounds, not the best one. */
  const double per_gemm = 2.0 * GEMM_N * GEMM_N * GEMM_N;
  double best = 0;
  int64_t end = ftl_clock_ns() + budget_ms * 1000000;
  do {
    int64_t t0 = ftl_clock_ns();
    for (int r = 0; r < 4; r++)
      gemm(a, b, c);
    int64_t dt = ftl_clock_ns() - t0;
    if (dt > 0 && 4 * per_gemm * 1e9 / (double)dt > best) best = 4 * per_gemm * 1e9 / (double)dt;
  } while (ftl_clock_ns() < end);
  /* Read the result, or the compiler could drop the work. */
  volatile float sink = c[n / 2];
  (void)sink;
  ftl_free(m);
  return best;
}

/* The process's one measurement: 0 not started, 1 running, 2 done (rate set before). */
static atomic_int cpu_state;
static _Atomic double cpu_rate;
static pthread_mutex_t cpu_start_lock = PTHREAD_MUTEX_INITIALIZER;

enum { CPU_BUDGET_MS = 1000 };

static void *cpu_main(void *arg) {
  (void)arg;
  atomic_store(&cpu_rate, ln_cpu_gemm_rate(CPU_BUDGET_MS));
  atomic_store(&cpu_state, 2);
  return NULL;
}

void ln_cpu_peak_start(void) {
  if (atomic_load(&cpu_state) != 0) return;
  pthread_mutex_lock(&cpu_start_lock);
  if (atomic_load(&cpu_state) == 0) {
    pthread_t t;
    pthread_attr_t attr;
    int ok = pthread_attr_init(&attr) == 0;
    if (ok) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    atomic_store(&cpu_state, 1);
    if (!ok || pthread_create(&t, &attr, cpu_main, NULL) != 0) {
      FTL_LOG(FTL_LOG_WARN, "launcher", "cannot start the CPU peak measurement: MFU on CPUs is unknown");
      atomic_store(&cpu_rate, 0);
      atomic_store(&cpu_state, 2);
    }
    if (ok) pthread_attr_destroy(&attr);
  }
  pthread_mutex_unlock(&cpu_start_lock);
}

int ln_cpu_peak_get(double *flops) {
  if (atomic_load(&cpu_state) != 2) return 0;
  *flops = atomic_load(&cpu_rate);
  return 1;
}

int ln_cpu_peak_wait(int64_t deadline_ms, double *flops) {
  while (!ln_cpu_peak_get(flops)) {
    if (atomic_load(&cpu_state) == 0 || ftl_clock_ms() >= deadline_ms) return 0;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return 1;
}
