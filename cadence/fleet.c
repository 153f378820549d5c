/* cadence/fleet.c: the fleet's per-host history (include/ftl/cadence.h, "the fleet's per-host
 * history"; docs/formats/fleet-ledger.md, "Per-host history"): a fleet ledger read, under the
 * ledgers' shared lock and size bound (core_jsonl_read, as ftl_cadence_load_ledger reads), into
 * one summary per host of what its records in a window say: counted failures blamed on it, its
 * GPUs' latest verdicts, its exposure, and a standing (bad, degraded, ok) with a one-line reason.
 * `ftl run` reads it to leave bad hosts out and move degraded ones to the end of its plan; `ftl
 * fleet` prints it.
 *
 * Map: a name index (hosts, and GPUs by host and UUID) · one record into the tallies · the
 * standings, their reasons and the order · load/parse/find/free. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure_record.h"
#include "core/jsonl.h"
#include "core/name_index.h"
#include "ftl/cadence.h"
#include "ftl/core.h"

/* As the cadence's loader (ledger.c): a whole ledger read at once. */
#define FLEET_MAX_BYTES ((size_t)256 << 20)
#define FLEET_LOCK_TIMEOUT_MS 10000
/* Hosts and GPUs remembered at most; the rest are not summarised (and said so in the log). */
#define FLEET_MAX_HOSTS 65536
#define FLEET_MAX_GPUS (8 * FLEET_MAX_HOSTS)

/* ---- the tallies -------------------------------------------------------------------------- */

typedef struct gpu_state {
  size_t host;        /* index of its host */
  char uuid[96];
  char verdict[16];   /* latest in the window */
  int64_t at_us;      /* of that verdict */
  int ever_failed;    /* some record in the window said failed */
  char reason[256];   /* of the latest non-healthy verdict */
  char job[128];
  int64_t failed_at_us;
  char failed_reason[256];
  char failed_job[128];
} gpu_state;

typedef struct tally {
  ftl_cadence_fleet_host *hosts;
  size_t n_hosts, cap_hosts;
  core_name_index host_ix;
  gpu_state *gpus;
  size_t n_gpus, cap_gpus;
  core_name_index gpu_ix;
  /* per host, the newest counted failure's cause and job (for the reason line) */
  struct newest {
    char cause[32];
    char job[128];
    int64_t at_us;
    int64_t host_failures; /* counted failures that say something about the host (not exit_code) */
    int64_t addrs_at_us;   /* of the addresses kept */
  } *newest;
  int dropped;
} tally;

static const char *host_key(const tally *t, size_t i) { return t->hosts[i].host; }

static int host_is(const void *entries, size_t i, const char *name, const char *unused) {
  (void)unused;
  return !strcmp(((const tally *)entries)->hosts[i].host, name);
}

static int gpu_is(const void *entries, size_t i, const char *host, const char *uuid) {
  const tally *t = entries;
  return t->gpus[i].host < t->n_hosts && !strcmp(host_key(t, t->gpus[i].host), host) && !strcmp(t->gpus[i].uuid, uuid);
}

/* The host's index, added when new; -1 when out of memory or past the bound. */
static long host_of(tally *t, const char *name) {
  char key[sizeof t->hosts[0].host]; /* the name as kept (cut to the field) is the one indexed */
  snprintf(key, sizeof key, "%s", name);
  uint64_t hash = core_name_hash(key, NULL);
  long at = core_name_index_find(&t->host_ix, hash, key, NULL, host_is, t);
  if (at >= 0) return at;
  if (t->n_hosts >= FLEET_MAX_HOSTS) {
    t->dropped = 1;
    return -2;
  }
  if (t->n_hosts == t->cap_hosts) {
    size_t cap = t->cap_hosts ? t->cap_hosts * 2 : 64;
    ftl_cadence_fleet_host *h = ftl_realloc(t->hosts, cap * sizeof *h);
    if (!h) return -1;
    t->hosts = h;
    struct newest *nw = ftl_realloc(t->newest, cap * sizeof *nw);
    if (!nw) return -1;
    t->newest = nw;
    t->cap_hosts = cap;
  }
  size_t i = t->n_hosts;
  memset(&t->hosts[i], 0, sizeof t->hosts[i]);
  memset(&t->newest[i], 0, sizeof t->newest[i]);
  memcpy(t->hosts[i].host, key, sizeof key);
  if (core_name_index_put(&t->host_ix, hash, i)) return -1;
  t->n_hosts++;
  return (long)i;
}

/* The GPU's state, added when new; NULL when out of memory (*oom set) or past the bound. */
static gpu_state *gpu_of(tally *t, size_t host, const char *uuid, int *oom) {
  char key[sizeof t->gpus[0].uuid];
  snprintf(key, sizeof key, "%s", uuid);
  uint64_t hash = core_name_hash(host_key(t, host), key);
  long at = core_name_index_find(&t->gpu_ix, hash, host_key(t, host), key, gpu_is, t);
  if (at >= 0) return &t->gpus[at];
  if (t->n_gpus >= FLEET_MAX_GPUS) {
    t->dropped = 1;
    return NULL;
  }
  if (t->n_gpus == t->cap_gpus) {
    size_t cap = t->cap_gpus ? t->cap_gpus * 2 : 64;
    gpu_state *g = ftl_realloc(t->gpus, cap * sizeof *g);
    if (!g) return *oom = 1, NULL;
    t->gpus = g;
    t->cap_gpus = cap;
  }
  gpu_state *g = &t->gpus[t->n_gpus];
  memset(g, 0, sizeof *g);
  g->host = host;
  memcpy(g->uuid, key, sizeof key);
  snprintf(g->verdict, sizeof g->verdict, "healthy");
  if (core_name_index_put(&t->gpu_ix, hash, t->n_gpus)) return *oom = 1, NULL;
  t->n_gpus++;
  return g;
}

static void seen(ftl_cadence_fleet_host *h, int64_t at_us) {
  if (at_us > h->last_seen_us) h->last_seen_us = at_us;
}

/* The newest addresses a record gave for the host. */
static void take_addrs(ftl_cadence_fleet_host *h, struct newest *nw, const core_failure_record *r) {
  if (!r->addrs[0] || r->wall_us < nw->addrs_at_us) return;
  nw->addrs_at_us = r->wall_us;
  memcpy(h->addrs, r->addrs, sizeof h->addrs);
}

/* A GPU's verdict at r->wall_us: the latest one wins (file order breaks ties: appended later). A
 * weak one (a gpu_failed failure, which only says that the GPU failed) never overrides a gpu_health
 * record's of the same moment, which says why. */
static int take_verdict(tally *t, size_t host, const core_failure_record *r, const char *verdict, const char *reason,
                        int weak) {
  int oom = 0;
  gpu_state *g = gpu_of(t, host, r->gpu, &oom);
  if (!g) return oom ? -1 : 0;
  if (weak && (g->ever_failed || r->wall_us <= g->at_us)) return 0;
  if (!strcmp(verdict, "failed") && (!g->ever_failed || r->wall_us >= g->failed_at_us)) {
    g->ever_failed = 1;
    g->failed_at_us = r->wall_us;
    snprintf(g->failed_reason, sizeof g->failed_reason, "%s", reason);
    snprintf(g->failed_job, sizeof g->failed_job, "%s", r->job);
  }
  if (r->wall_us < g->at_us) return 0;
  g->at_us = r->wall_us;
  snprintf(g->verdict, sizeof g->verdict, "%s", verdict);
  if (strcmp(verdict, "healthy") != 0) {
    snprintf(g->reason, sizeof g->reason, "%s", reason);
    snprintf(g->job, sizeof g->job, "%s", r->job);
  }
  return 0;
}

/* One record of the window into the tallies; -1 when out of memory. */
static int take(tally *t, const core_failure_record *r) {
  if (r->kind == CORE_REC_EXPOSURE) {
    for (size_t i = 0; i < r->n_hosts && i < CORE_FR_MAX_HOSTS; i++) {
      long h = host_of(t, r->hosts[i].host);
      if (h == -1) return -1;
      if (h < 0) continue;
      t->hosts[h].rank_hours += r->hosts[i].rank_hours;
      seen(&t->hosts[h], r->wall_us);
    }
    return 0;
  }
  if (!r->host[0] || (r->kind != CORE_REC_FAILURE && r->kind != CORE_REC_GPU_HEALTH)) return 0;
  long h = host_of(t, r->host);
  if (h == -1) return -1;
  if (h < 0) return 0;
  seen(&t->hosts[h], r->wall_us);
  take_addrs(&t->hosts[h], &t->newest[h], r);
  if (r->kind == CORE_REC_GPU_HEALTH) return take_verdict(t, (size_t)h, r, r->verdict, r->reason, 0);
  if (ftl_cadence_classify(r->cause, r->step) != FTL_CADENCE_CAUSE_FAILURE) return 0;
  t->hosts[h].failures++;
  struct newest *nw = &t->newest[h];
  /* A program's own error exit follows the program wherever it runs: it is counted, but does not
   * make the host bad. */
  if (strcmp(r->cause, "exit_code") != 0) nw->host_failures++;
  if (r->wall_us >= nw->at_us) {
    nw->at_us = r->wall_us;
    snprintf(nw->cause, sizeof nw->cause, "%s", r->cause);
    snprintf(nw->job, sizeof nw->job, "%s", r->job);
  }
  if (strcmp(r->cause, "gpu_failed") != 0) return 0;
  t->hosts[h].gpu_failures++;
  /* The failure names its GPU when the launcher knew it; its reason is the gpu_health record's. */
  return r->gpu[0] ? take_verdict(t, (size_t)h, r, "failed", "ended an attempt: gpu_failed", 1) : 0;
}

/* ---- the standings ------------------------------------------------------------------------ */

static void set_reason(ftl_cadence_fleet_host *h, const char *job, int64_t at_us, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void set_reason(ftl_cadence_fleet_host *h, const char *job, int64_t at_us, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(h->reason, sizeof h->reason, fmt, ap);
  va_end(ap);
  snprintf(h->job, sizeof h->job, "%s", job);
  h->bad_since_us = at_us;
}

/* Each host's standing and reason from its GPUs and failures. */
static void judge(tally *t) {
  for (size_t i = 0; i < t->n_gpus; i++) {
    gpu_state *g = &t->gpus[i];
    ftl_cadence_fleet_host *h = &t->hosts[g->host];
    if (g->ever_failed) {
      h->gpus_failed++;
      if (h->standing != FTL_CADENCE_HOST_BAD || g->failed_at_us > h->bad_since_us) {
        h->standing = FTL_CADENCE_HOST_BAD;
        set_reason(h, g->failed_job, g->failed_at_us, "GPU %s failed (%s)", g->uuid,
                   g->failed_reason[0] ? g->failed_reason : "no reason given");
      }
    } else if (!strcmp(g->verdict, "degraded")) {
      h->gpus_degraded++;
      if (h->standing == FTL_CADENCE_HOST_OK || (h->standing == FTL_CADENCE_HOST_DEGRADED && g->at_us > h->bad_since_us)) {
        h->standing = FTL_CADENCE_HOST_DEGRADED;
        set_reason(h, g->job, g->at_us, "GPU %s degraded (%s)", g->uuid, g->reason[0] ? g->reason : "no reason given");
      }
    }
  }
  for (size_t i = 0; i < t->n_hosts; i++) {
    ftl_cadence_fleet_host *h = &t->hosts[i];
    const struct newest *nw = &t->newest[i];
    int gpu_bad = h->standing == FTL_CADENCE_HOST_BAD;
    if (!gpu_bad && h->gpu_failures > 0) {
      h->standing = FTL_CADENCE_HOST_BAD;
      set_reason(h, nw->job, nw->at_us, "a GPU failed (gpu_failed)");
    } else if (!gpu_bad && nw->host_failures >= 2) {
      h->standing = FTL_CADENCE_HOST_BAD;
      set_reason(h, nw->job, nw->at_us, "%lld failures blamed on it (newest: %s)", (long long)h->failures, nw->cause);
    }
  }
}

static int worse_first(const void *pa, const void *pb) {
  const ftl_cadence_fleet_host *a = pa, *b = pb;
  if (a->standing != b->standing) return a->standing > b->standing ? -1 : 1;
  if (a->failures != b->failures) return a->failures > b->failures ? -1 : 1;
  if (a->gpus_degraded != b->gpus_degraded) return a->gpus_degraded > b->gpus_degraded ? -1 : 1;
  return strcmp(a->host, b->host);
}

const char *ftl_cadence_host_standing_name(ftl_cadence_host_standing s) {
  switch (s) {
    case FTL_CADENCE_HOST_OK: return "ok";
    case FTL_CADENCE_HOST_DEGRADED: return "degraded";
    case FTL_CADENCE_HOST_BAD: return "bad";
  }
  return "unknown";
}

/* ---- load, parse, find, free -------------------------------------------------------------- */

typedef struct parse_ctx {
  tally *t;
  const char *name;
  int64_t since_us; /* records at or after this count; INT64_MIN: all */
  core_fr_host *hosts;
  ftl_cadence_fleet_hosts *out;
  int oom;
} parse_ctx;

static ftl_err one_line(const char *line, size_t len, size_t line_no, void *vctx) {
  parse_ctx *c = vctx;
  c->out->lines++;
  core_failure_record r;
  ftl_diag pd = {{0}};
  if (core_failure_record_parse_hosts(line, len, &r, c->hosts, CORE_FR_MAX_HOSTS, &pd) != FTL_OK) {
    c->out->skipped++;
    FTL_LOG(FTL_LOG_WARN, "cadence", "%s:%zu: skipped ledger line: %s", c->name, line_no, pd.msg);
    if (!c->out->first_problem[0] &&
        ftl_fmt(c->out->first_problem, sizeof c->out->first_problem, "%s:%zu: %s", c->name, line_no, pd.msg))
      c->out->first_problem[sizeof c->out->first_problem - 1] = '\0';
    return FTL_OK;
  }
  if (r.wall_us != 0 && r.wall_us < c->since_us) return FTL_OK;
  if (take(c->t, &r) < 0) {
    c->oom = 1;
    return FTL_ERR_NOMEM;
  }
  return FTL_OK;
}

static void tally_free(tally *t) {
  core_name_index_free(&t->host_ix);
  core_name_index_free(&t->gpu_ix);
  ftl_free(t->gpus);
  ftl_free(t->newest);
}

ftl_err ftl_cadence_fleet_hosts_parse(const char *data, size_t size, const char *name, int64_t now_us,
                                      double window_s, ftl_cadence_fleet_hosts *out, ftl_diag *d) {
  if (!out) return ftl_diag_fail(d, FTL_ERR_INVAL, "fleet history: no output");
  memset(out, 0, sizeof *out);
  if ((!data && size) || !(window_s >= 0) || !isfinite(window_s))
    return ftl_diag_fail(d, FTL_ERR_INVAL, "fleet history: no data, or a window of %g s", window_s);
  if (!name) name = "fleet ledger";
  tally t = {0};
  parse_ctx c = {.t = &t, .name = name, .out = out};
  double since = (double)now_us - window_s * 1e6;
  c.since_us = since <= -9e18 ? INT64_MIN : (int64_t)since;
  c.hosts = ftl_calloc(CORE_FR_MAX_HOSTS, sizeof *c.hosts);
  ftl_err rc = c.hosts ? FTL_OK : FTL_ERR_NOMEM;
  /* A last line without its newline is a write in progress or torn: not a record yet. */
  size_t whole = size;
  while (whole > 0 && data[whole - 1] != '\n') whole--;
  if (!rc) rc = core_jsonl_each_line(data, whole, one_line, &c);
  int torn = 0;
  for (size_t i = whole; i < size; i++) torn |= data[i] != ' ' && data[i] != '\t' && data[i] != '\r';
  if (!rc && torn) {
    out->lines++;
    out->skipped++;
    FTL_LOG(FTL_LOG_WARN, "cadence", "%s: last line has no newline (a write in progress or torn)", name);
    if (!out->first_problem[0])
      (void)ftl_fmt(out->first_problem, sizeof out->first_problem, "%s: last line has no newline (a write in "
                    "progress or torn)", name); /* cut at worst: only a message */
  }
  ftl_free(c.hosts);
  if (!rc && t.dropped)
    FTL_LOG(FTL_LOG_WARN, "cadence", "%s: more than %d hosts or %d GPUs: the rest are not summarised", name,
            FLEET_MAX_HOSTS, FLEET_MAX_GPUS);
  if (!rc) {
    judge(&t);
    if (t.n_hosts) qsort(t.hosts, t.n_hosts, sizeof *t.hosts, worse_first);
    out->hosts = t.hosts;
    out->count = t.n_hosts;
    t.hosts = NULL;
  }
  ftl_free(t.hosts);
  tally_free(&t);
  if (rc) {
    ftl_cadence_fleet_hosts_free(out);
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "fleet history: out of memory reading %s", name);
  }
  return FTL_OK;
}

ftl_err ftl_cadence_fleet_hosts_load(const char *path, int64_t now_us, double window_s, ftl_cadence_fleet_hosts *out,
                                     ftl_diag *d) {
  if (!path || !out) return ftl_diag_fail(d, FTL_ERR_INVAL, "fleet history: no ledger path or output");
  memset(out, 0, sizeof *out);
  char *data = NULL;
  size_t size = 0;
  ftl_err rc = core_jsonl_read(path, FLEET_MAX_BYTES, FLEET_LOCK_TIMEOUT_MS, &data, &size, d);
  if (rc) return rc;
  rc = ftl_cadence_fleet_hosts_parse(data, size, path, now_us, window_s, out, d);
  ftl_free(data);
  return rc;
}

const ftl_cadence_fleet_host *ftl_cadence_fleet_hosts_find(const ftl_cadence_fleet_hosts *h, const char *host) {
  if (!h || !host) return NULL;
  for (size_t i = 0; i < h->count; i++)
    if (!strncmp(h->hosts[i].host, host, sizeof h->hosts[i].host - 1)) return &h->hosts[i];
  return NULL;
}

void ftl_cadence_fleet_hosts_free(ftl_cadence_fleet_hosts *h) {
  if (!h) return;
  ftl_free(h->hosts);
  h->hosts = NULL;
  h->count = 0;
}
