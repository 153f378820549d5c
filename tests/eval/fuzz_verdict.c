/* tests/eval/fuzz_verdict.c: libFuzzer harness for the verdict reader (`ftl publish` reads
 * RUNDIR/verdict.json, and a registry's baseline verdict comes from another run). Any input is
 * refused with a reason or accepted; an accepted one can be summarised. */
#include <stdint.h>
#include <stdlib.h>

#include "eval/decide.h"
#include "eval/gate.h"
#include "eval/gate_spec.h"
#include "eval/verdict.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  json_t *v = NULL;
  ftl_diag d = {{0}};
  if (ev_verdict_parse((const char *)data, size, &v, &d) != FTL_OK) {
    if (!d.msg[0]) abort();
    return 0;
  }
  char line[512];
  ev_verdict_summary(v, line, sizeof line);
  json_decref(v);
  return 0;
}
