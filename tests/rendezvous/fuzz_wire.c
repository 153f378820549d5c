/* tests/rendezvous/fuzz_wire.c: libFuzzer harness for the launcher wire format: arbitrary bytes
 * (what a confused or hostile peer could send) go through the line buffer and the message parser,
 * and every parsed message through the typed getters the launcher and agent use; a relay's
 * envelope (fwd: its inner message) and batch (its entries) are read as the server reads them,
 * and every line also goes through the batch's own fast parser (rz_wire_batch_parse). */
#include <stdint.h>
#include <string.h>

#include "ftl/core.h"
#include "rendezvous/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_fields(const json_t *msg) {
  (void)rz_wire_str(msg, "type", "");
  (void)rz_wire_str(msg, "token", "");
  (void)rz_wire_int(msg, "rank", -1);
  (void)rz_wire_int(msg, "signal", 0);
  (void)rz_wire_num(msg, "mpi_init_ms", 0);
  (void)rz_wire_num(msg, "flops", -1);
  (void)rz_wire_num(msg, "flops_ms", -1);
  (void)rz_wire_str(msg, "role", "");
  (void)rz_wire_str(msg, "to", "");
  (void)rz_wire_int(msg, "to_rank", -1);
  (void)rz_wire_int(msg, "batch_ms", -1);
  (void)rz_wire_int(msg, "samples", -1);
}

static void on_entry(void *user, const rz_batch_entry *e) {
  size_t *n = user;
  *n += e->alive ? strlen(e->state) : (size_t)(e->compute_ms != 0) + (size_t)(e->has_flops && e->flops > e->flops_ms);
  for (int k = 0; !e->alive && k < e->nsamples; k++) *n += e->samples[k] > 0; /* the period's samples */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* Each line through the batch's fast path too, as the launcher reads a relay's lines. */
  size_t entries = 0;
  for (size_t at = 0; at < size;) {
    const uint8_t *nl = memchr(data + at, '\n', size - at);
    size_t len = nl ? (size_t)(nl - (data + at)) : size - at;
    (void)rz_wire_batch_parse((const char *)data + at, len, on_entry, &entries);
    at += len + 1;
  }
  rz_linebuf lb = {0};
  lb.data = ftl_malloc(size + 1);
  if (!lb.data) return 0;
  memcpy(lb.data, data, size);
  lb.len = size;
  lb.cap = size + 1;
  for (;;) {
    json_t *msg = NULL;
    ftl_diag d;
    ftl_err rc = rz_linebuf_next(&lb, &msg, &d);
    if (rc == FTL_ERR_NOTFOUND) break;
    if (rc != FTL_OK) continue; /* a bad line is dropped; the next one is still read */
    read_fields(msg);
    const json_t *inner = json_object_get(msg, "msg");
    if (json_is_object(inner)) read_fields(inner);
    static const char *const lists[] = {"step", "alive"};
    for (size_t k = 0; k < 2; k++) {
      const json_t *list = json_object_get(msg, lists[k]), *entry;
      size_t i;
      if (!json_is_array(list)) continue;
      json_array_foreach(list, i, entry) {
        (void)json_is_integer(json_array_get(entry, 0));
        (void)json_array_size(entry);
      }
    }
    json_decref(msg);
  }
  rz_linebuf_free(&lb);
  return 0;
}
