/* tests/fuzz/fuzz_runlock.c: libFuzzer harness for the run directory lock's record reader
 * (launcher/runlock.c, ln_run_lock_parse): RUNDIR/ftl.lock is read from disk, where any bytes can
 * lie (a torn write, another tool). Any bytes must give a NUL-terminated, non-empty description
 * naming a holder (or saying there is no record), never a crash, a leak or a hang; broken promises
 * trap so the fuzzer keeps the input. Not covered: the flock itself (tests/launcher/run_dir_lock.sh). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "launcher/runlock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int ok) {
  if (!ok) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char holder[700];
  int released = -1;
  memset(holder, 'x', sizeof holder);
  int is_record = ln_run_lock_parse((const char *)data, size, holder, sizeof holder, &released);
  require(memchr(holder, '\0', sizeof holder) != NULL);
  require(holder[0] != '\0');
  require(released == 0 || released == 1);
  require(is_record == 0 || is_record == 1);
  require(is_record || !released);
  if (is_record) require(strncmp(holder, "pid ", 4) == 0);
  return 0;
}
