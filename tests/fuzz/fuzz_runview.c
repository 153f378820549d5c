/* tests/fuzz/fuzz_runview.c: libFuzzer harness for the reader of a run's event log behind `ftl
 * status`, `ftl report`, the progress line and the metrics textfile (launcher/runview.c, and the
 * formatters fed by it: progress.c, prom.c). events.jsonl is read from disk, where any bytes can lie
 * (a torn line, another tool's lines, wrong types, huge numbers). Any bytes must fold without a
 * crash, a leak or a hang, and the formatters must give NUL-terminated text; broken promises trap
 * so the fuzzer keeps the input. The `mfu` events' reader (launcher/mfu.c) with them. Not covered: status.c's other files, report.c's page (tested by
 * tests/launcher/ops_report.sh). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ftl/core.h"
#include "launcher/progress.h"
#include "launcher/prom.h"
#include "launcher/runview.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int ok) {
  if (!ok) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ln_runview rv;
  ln_runview_init(&rv, 1);
  ln_runview_add_log(&rv, (const char *)data, size);
  require(rv.n_attempts >= 0 && rv.n_attempts <= rv.cap_attempts);
  require(rv.n_samples <= rv.cap_samples);
  char line[512];
  memset(line, 'x', sizeof line);
  ln_progress_format(&rv, rv.last_us, line, sizeof line);
  require(memchr(line, '\0', sizeof line) != NULL);
  ln_rv_goodput g = ln_runview_goodput(&rv, rv.last_us);
  (void)g;
  /* GPU health and stragglers: bounded, and a straggler's GPU is one of the view's. */
  require(rv.n_gpus <= 4096 && rv.n_gpu_changes <= 4096 && rv.n_stragglers <= 4096);
  for (int i = 0; i < rv.n_stragglers; i++) {
    const ln_rv_gpu *gpu = ln_runview_gpu_of_rank(&rv, rv.stragglers[i].host, rv.stragglers[i].local_rank);
    require(!gpu || (gpu >= rv.gpus && gpu < rv.gpus + rv.n_gpus));
  }
  /* MFU (mfu events): the run's sum and its sentence are finite or absent, and NUL-terminated. */
  ln_mfu_run run;
  ln_runview_mfu(&rv, &run);
  require(run.mfu < 0 || isfinite(run.mfu));
  require(memchr(run.peak, '\0', sizeof run.peak) != NULL);
  memset(line, 'x', sizeof line);
  ln_mfu_phrase(line, sizeof line, g.measured ? g.pct : -1, run.mfu, run.source, run.peak);
  require(memchr(line, '\0', sizeof line) != NULL);
  char *text = NULL;
  size_t len = 0;
  ftl_diag d = {{0}};
  if (ln_prom_format(&rv, "fuzz\"job\\\n", 1, rv.last_us, &text, &len, &d) == FTL_OK) {
    require(text != NULL && strlen(text) == len);
    require(strstr(text, "{ftl_job=\"fuzz\\\"job\\\\\\n\"}") != NULL); /* the label escaped */
    ftl_free(text);
  }
  ln_runview_free(&rv);
  return 0;
}
