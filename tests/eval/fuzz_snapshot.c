/* tests/eval/fuzz_snapshot.c: libFuzzer harness for the snapshot record's reader
 * (pipeline/snapshot.h; RUNDIR/snapshot.json is read back by relaunches, the gate and publish).
 * Any input is refused with a reason or accepted with a matching digest; the accessors of an
 * accepted record never read out of bounds. */
#include <stdint.h>
#include <stdlib.h>

#include "pipeline/snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  json_t *s = NULL;
  ftl_diag d = {{0}};
  if (pl_snapshot_parse((const char *)data, size, &s, &d) != FTL_OK) {
    if (!d.msg[0]) abort();
    return 0;
  }
  if (!pl_snapshot_digest(s)) abort();
  (void)pl_snapshot_input_path(s, "heldout");
  (void)pl_snapshot_gate(s);
  json_decref(s);
  return 0;
}
