/* checkpoint/ckpt_shared.c: the small helpers every file of the checkpoint API shares (declared in
 * checkpoint/ckpt_internal.h): the handle's last error, events to the launcher, a bounded copy of
 * message text, and elapsed time. A leaf: it calls no other file of the API, so the handle's
 * files (ckpt.c, ckpt_state.c, ckpt_save.c, ckpt_writer.c) meet here without calling each other
 * in a circle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/ckpt_internal.h"

ftl_err ck_fail(ftl_ckpt *ck, ftl_err rc, const char *msg) {
  if (rc) {
    snprintf(ck->errmsg, sizeof ck->errmsg, "%s", msg);
    FTL_LOG(FTL_LOG_ERROR, "ckpt", "%s", msg);
  }
  return rc;
}

void ck_copy_text(char *dst, size_t size, const char *src) {
  size_t n = strnlen(src, size - 1);
  memcpy(dst, src, n);
  dst[n] = '\0';
}

double ck_ms_since(int64_t t0_ns) { return (double)(ftl_clock_ns() - t0_ns) / 1e6; }

void ck_emit(ftl_ckpt *ck, const char *event, json_t *fields) {
  if (!fields) return;
  char *text = json_dumps(fields, JSON_COMPACT);
  json_decref(fields);
  if (!text) return;
  if (ck->ctx) {
    ftl_err rc = ftl_ctx_emit_event(ck->ctx, event, text);
    if (rc) FTL_LOG(FTL_LOG_DEBUG, "ckpt", "event %s not sent: %s", event, ftl_strerror(rc));
  }
  free(text);
}

const char *ck_level_name(int level) {
  return level == FTL_CKPT_LEVEL_L1 ? "l1" : level == FTL_CKPT_LEVEL_L2 ? "l2" : "l3";
}
