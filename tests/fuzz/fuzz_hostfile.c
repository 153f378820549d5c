/* tests/fuzz/fuzz_hostfile.c: libFuzzer harness for the hostfile reader (launcher/hostfile.c).
 *
 * Any bytes must give either hosts that keep the promises of hostfile.h (at least one, each with a
 * valid name, 1..FTL_HOSTFILE_SLOTS_MAX slots, max_slots 0 or >= slots, distinct names) or an error
 * with a message, never a crash, a leak or a hang. Broken promises trap so the fuzzer keeps the input.
 * Not covered here: ln_hostfile_read (the same parser behind a read). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ftl/core.h"
#include "launcher/hostfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int ok) {
  if (!ok) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ln_hostfile_host *hosts = NULL;
  size_t count = 0;
  ftl_diag d = {{0}};
  ftl_err rc = ln_hostfile_parse((const char *)data, size, "fuzz-hosts", &hosts, &count, &d);
  if (rc != FTL_OK) {
    require(hosts == NULL && count == 0);
    require(d.msg[0] != '\0');
    require(memchr(d.msg, '\0', sizeof d.msg) != NULL);
    return 0;
  }
  require(hosts != NULL && count >= 1);
  for (size_t i = 0; i < count; i++) {
    const ln_hostfile_host *h = &hosts[i];
    size_t len = strnlen(h->name, sizeof h->name);
    require(len >= 1 && len <= FTL_HOSTFILE_NAME_MAX);
    require(strncmp(h->line, h->name, len) == 0); /* the line starts with its host */
    require(h->slots >= 1 && h->slots <= FTL_HOSTFILE_SLOTS_MAX);
    require(h->max_slots == 0 || h->max_slots >= h->slots);
    require(h->line_no >= 1);
    for (size_t j = 0; j < i; j++) require(strcmp(hosts[j].name, h->name) != 0);
  }
  require(ln_hostfile_total_slots(hosts, count) >= (int)count);
  ftl_free(hosts);
  return 0;
}
