/* launcher/fleet.c: the fleet ledger from the launcher's side, an attempt at a time (fleet.h): the
 * supervisor's notes of each rank's host and of each GPU verdict that changed, kept in bounded
 * tables while the attempt runs; after it, the gpu_health records, the failure's GPU and host
 * addresses, and the exposure split by host, appended with the cadence's appender
 * (ftl_cadence_fleet_append: locked, fsynced); and FTL_GANG_HOSTS for the attempt's ranks. The
 * decision before the first attempt is fleet_plan.c's; `ftl fleet` is fleet_cmd.c's. */
#include "launcher/fleet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/launch_env.h"
#include "ftl/core.h"
#include "launcher/fleet_internal.h"
#include "launcher/gang.h"

/* The attempt's tables' bounds: hosts of a gang, GPUs not healthy at once, verdict changes written. */
#define MAX_RANK_HOSTS 4096
#define MAX_GPUS_SEEN 2048
#define MAX_CHANGES 512
#define LEDGER_TIMEOUT_MS 10000

static void copy(char *dst, size_t size, const char *src) {
  (void)ftl_fmt(dst, size, "%s", src ? src : ""); /* cut at worst: names are cut to the ledger's 63 bytes */
}

ln_fleet *ln_fleet_open(const ln_job *job) {
  if (!job || !job->fleet_ledger) return NULL;
  ln_fleet *f = ftl_calloc(1, sizeof *f);
  if (f) {
    f->hosts = ftl_calloc(MAX_RANK_HOSTS, sizeof *f->hosts);
    f->seen = ftl_calloc(MAX_GPUS_SEEN, sizeof *f->seen);
    f->changes = ftl_calloc(MAX_CHANGES, sizeof *f->changes);
    f->gang = ftl_calloc(1, CORE_GANG_HOSTS_MAX + 1);
  }
  if (!f || !f->hosts || !f->seen || !f->changes || !f->gang) {
    FTL_LOG(FTL_LOG_WARN, "launcher", "out of memory: the fleet ledger gets no per-host records from this job");
    ln_fleet_close(f);
    return NULL;
  }
  f->ledger = job->fleet_ledger;
  f->history_days = job->fleet_history_days;
  f->by_srun = ln_gang_resolve_kind(job->launcher, getenv("SLURM_JOB_ID")) == FTL_LAUNCH_SRUN;
  if (f->history_days <= 0) return f;
  ftl_diag d = {{0}};
  ftl_err rc = ftl_cadence_fleet_hosts_load(f->ledger, ftl_wall_us(), f->history_days * 86400.0, &f->hist, &d);
  if (rc == FTL_OK)
    f->have_hist = 1;
  else if (rc != FTL_ERR_NOTFOUND)
    FTL_LOG(FTL_LOG_WARN, "launcher", "fleet ledger: the hosts' history cannot be read, none is used: %s", d.msg);
  return f;
}

void ln_fleet_close(ln_fleet *f) {
  if (!f) return;
  ftl_cadence_fleet_hosts_free(&f->hist);
  ftl_free(f->hosts);
  ftl_free(f->seen);
  ftl_free(f->changes);
  ftl_free(f->rank_host);
  ftl_free(f->plan);
  ftl_free(f->gang);
  ftl_free(f);
}

/* ---- the gang's hosts ------------------------------------------------------------------------ */

/* The name the fleet's history knows a plan entry by: a summary named so, or one whose addresses
 * include it (a hostfile that names hosts by address); else the entry itself. */
static const char *history_name(const ln_fleet *f, const char *entry) {
  for (size_t i = 0; f->have_hist && i < f->hist.count; i++)
    if (ln_policy_host_matches(entry, f->hist.hosts[i].host, f->hist.hosts[i].addrs)) return f->hist.hosts[i].host;
  return entry;
}

/* The plan as mpirun maps it: the hosts not left out, slot by slot in order, up to world ranks. */
static void plan_shares(ln_fleet *f, const ln_policy_host *hosts, size_t n, int world) {
  f->n_plan = 0;
  ftl_free(f->plan);
  f->plan = ftl_calloc(n ? n : 1, sizeof *f->plan);
  if (!f->plan || (f->by_srun && n == 0)) return; /* srun with the allocation's plan places as it says */
  if (n == 0) {
    copy(f->plan[0].host, sizeof f->plan[0].host, ftl_hostname());
    f->plan[0].ranks = world;
    f->n_plan = 1;
    return;
  }
  int left = world;
  for (size_t i = 0; i < n && left > 0; i++) {
    if (hosts[i].bad || hosts[i].slots < 1) continue;
    int take = hosts[i].slots < left ? hosts[i].slots : left;
    copy(f->plan[f->n_plan].host, sizeof f->plan[f->n_plan].host, history_name(f, hosts[i].name));
    f->plan[f->n_plan++].ranks = take;
    left -= take;
  }
}

const char *ln_fleet_attempt_begin(ln_fleet *f, const ln_policy_host *hosts, size_t n, int world) {
  if (!f) return NULL;
  f->n_hosts = f->n_seen = f->n_changes = 0;
  f->dropped = 0;
  ftl_free(f->rank_host);
  f->world = world > 0 ? world : 0;
  f->rank_host = ftl_calloc(f->world ? (size_t)f->world : 1, sizeof *f->rank_host);
  for (int i = 0; f->rank_host && i < f->world; i++) f->rank_host[i] = -1;
  plan_shares(f, hosts, n, world);
  size_t used = 0;
  f->gang[0] = '\0';
  for (size_t i = 0; i < f->n_plan; i++) {
    int w = snprintf(f->gang + used, CORE_GANG_HOSTS_MAX + 1 - used, "%s%s:%d", i ? "," : "", f->plan[i].host,
                     f->plan[i].ranks);
    if (w < 0 || (size_t)w >= CORE_GANG_HOSTS_MAX + 1 - used) {
      FTL_LOG(FTL_LOG_INFO, "launcher", "the gang's %zu hosts do not fit FTL_GANG_HOSTS (%d bytes): its ranks' "
              "cadence uses the pooled failure rate", f->n_plan, CORE_GANG_HOSTS_MAX);
      f->gang[0] = '\0';
      break;
    }
    used += (size_t)w;
  }
  return f->gang;
}

/* ---- the supervisor's notes ------------------------------------------------------------------ */

/* A host's addresses without the loopback ones: 127.0.0.1 is every host's, so in a fleet ledger it
 * would name them all (a hostfile line "127.0.0.1" is this machine, whichever it is). */
static void public_addrs(const char *addrs, char *out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (const char *p = addrs ? addrs : ""; *p;) {
    size_t n = strcspn(p, " ");
    if (n > 0 && strncmp(p, "127.", 4) != 0 && used + n + 1 < size) {
      if (used) out[used++] = ' ';
      memcpy(out + used, p, n);
      out[used += n] = '\0';
    }
    p += n;
    while (*p == ' ') p++;
  }
}

static long host_index(ln_fleet *f, const char *host) {
  for (size_t i = 0; i < f->n_hosts; i++)
    if (!strncmp(f->hosts[i].host, host, sizeof f->hosts[i].host - 1)) return (long)i;
  return -1;
}

void ln_fleet_note_rank(ln_fleet *f, int rank, const char *host, const char *addrs) {
  if (!f || !host || !host[0] || rank < 0 || rank >= f->world || !f->rank_host) return;
  long h = host_index(f, host);
  if (h < 0) {
    if (f->n_hosts == MAX_RANK_HOSTS) return; /* past the bound: the plan's shares stand in */
    h = (long)f->n_hosts++;
    copy(f->hosts[h].host, sizeof f->hosts[h].host, host);
  }
  if (addrs && addrs[0]) public_addrs(addrs, f->hosts[h].addrs, sizeof f->hosts[h].addrs);
  if (f->rank_host[rank] == h) return;
  if (f->rank_host[rank] >= 0) f->hosts[f->rank_host[rank]].ranks--;
  f->rank_host[rank] = (int)h;
  f->hosts[h].ranks++;
}

static const char *jstr(const json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

/* One GPU's verdict: a change from what this attempt last heard of it (healthy until said
 * otherwise) is kept for the ledger. */
static void note_gpu(ln_fleet *f, const char *host, const char *addrs, const json_t *g, int64_t wall_us) {
  const char *verdict = jstr(g, "verdict");
  int index = (int)json_integer_value(json_object_get(g, "index"));
  char uuid[96];
  /* A GPU whose UUID NVML did not give is named by its index on its host. */
  if (jstr(g, "uuid")[0]) copy(uuid, sizeof uuid, jstr(g, "uuid"));
  else (void)ftl_fmt(uuid, sizeof uuid, "index-%d", index);
  if (strcmp(verdict, "healthy") && strcmp(verdict, "degraded") && strcmp(verdict, "failed")) return;
  size_t at = f->n_seen;
  for (size_t i = 0; i < f->n_seen; i++)
    if (!strncmp(f->seen[i].host, host, sizeof f->seen[i].host - 1) && !strcmp(f->seen[i].gpu, uuid)) at = i;
  const char *prev = at < f->n_seen ? f->seen[at].verdict : "healthy";
  if (!strcmp(prev, verdict)) return;
  if (f->n_changes < MAX_CHANGES) {
    ln_fleet_change *c = &f->changes[f->n_changes++];
    copy(c->host, sizeof c->host, host);
    public_addrs(addrs, c->addrs, sizeof c->addrs);
    copy(c->gpu, sizeof c->gpu, uuid);
    copy(c->name, sizeof c->name, jstr(g, "name"));
    copy(c->verdict, sizeof c->verdict, verdict);
    copy(c->reason, sizeof c->reason, jstr(g, "reason"));
    c->index = index;
    c->wall_us = wall_us;
  } else {
    f->dropped++;
  }
  if (!strcmp(verdict, "healthy")) { /* back to the default: forget it */
    if (at < f->n_seen) f->seen[at] = f->seen[--f->n_seen];
    return;
  }
  if (at == f->n_seen) {
    if (f->n_seen == MAX_GPUS_SEEN) return;
    f->n_seen++;
    copy(f->seen[at].host, sizeof f->seen[at].host, host);
    copy(f->seen[at].gpu, sizeof f->seen[at].gpu, uuid);
  }
  copy(f->seen[at].verdict, sizeof f->seen[at].verdict, verdict);
}

void ln_fleet_note_gpus(ln_fleet *f, const char *host, const char *addrs, const json_t *gpus, int64_t wall_us) {
  if (!f || !host || !json_is_array(gpus)) return;
  size_t i;
  const json_t *g;
  json_array_foreach(gpus, i, g) note_gpu(f, host, addrs ? addrs : "", g, wall_us);
}

/* ---- the records after the attempt ----------------------------------------------------------- */

static void append(const ln_fleet *f, const char *path, const ftl_cadence_record *rec) {
  ftl_diag d = {{0}};
  if (ftl_cadence_fleet_append(path, rec, LEDGER_TIMEOUT_MS, &d) != FTL_OK)
    FTL_LOG(FTL_LOG_WARN, "launcher", "%s%s", path == f->ledger ? "fleet ledger: " : "", d.msg);
}

void ln_fleet_gpu_records(ln_fleet *f, const ln_job *job, int attempt, int world) {
  if (!f) return;
  for (size_t i = 0; i < f->n_changes; i++) {
    const ln_fleet_change *c = &f->changes[i];
    ftl_cadence_record rec = {.kind = FTL_CADENCE_REC_GPU_HEALTH, .wall_us = c->wall_us, .attempt = attempt,
                              .step = -1, .world_size = world, .gpu_index = c->index};
    copy(rec.job, sizeof rec.job, job->name);
    copy(rec.host, sizeof rec.host, c->host);
    copy(rec.gpu, sizeof rec.gpu, c->gpu);
    copy(rec.gpu_name, sizeof rec.gpu_name, c->name);
    copy(rec.verdict, sizeof rec.verdict, c->verdict);
    copy(rec.reason, sizeof rec.reason, c->reason);
    memcpy(rec.addrs, c->addrs, sizeof rec.addrs);
    append(f, f->ledger, &rec);
  }
  if (f->dropped)
    FTL_LOG(FTL_LOG_WARN, "launcher", "fleet ledger: %d more GPU verdict changes in attempt %d than the %d recorded",
            f->dropped, attempt, MAX_CHANGES);
}

void ln_fleet_fill_failure(const ln_fleet *f, ftl_cadence_record *rec) {
  if (!f || !rec->host[0]) return;
  for (size_t i = f->n_changes; i-- > 0;) {
    const ln_fleet_change *c = &f->changes[i];
    if (strncmp(c->host, rec->host, sizeof c->host - 1) != 0) continue;
    if (!rec->addrs[0]) memcpy(rec->addrs, c->addrs, sizeof rec->addrs);
    if (!strcmp(rec->cause, "gpu_failed") && !rec->gpu[0] && !strcmp(c->verdict, "failed"))
      memcpy(rec->gpu, c->gpu, sizeof rec->gpu);
  }
  for (size_t i = 0; !rec->addrs[0] && i < f->n_hosts; i++)
    if (!strncmp(f->hosts[i].host, rec->host, sizeof f->hosts[i].host - 1))
      memcpy(rec->addrs, f->hosts[i].addrs, sizeof rec->addrs);
}

/* The exposure's shares: the ranks each host ran by the agents' hellos, else as planned. */
static size_t exposure_shares(const ln_fleet *f, double rank_hours, ftl_cadence_host_hours *out, size_t max) {
  size_t n = 0;
  double ranks = 0;
  for (size_t i = 0; i < f->n_hosts; i++) ranks += f->hosts[i].ranks;
  int hellos = ranks > 0;
  if (!hellos)
    for (size_t i = 0; i < f->n_plan; i++) ranks += f->plan[i].ranks;
  size_t count = hellos ? f->n_hosts : f->n_plan;
  for (size_t i = 0; i < count && n < max && ranks > 0; i++) {
    const char *host = hellos ? f->hosts[i].host : f->plan[i].host;
    int r = hellos ? f->hosts[i].ranks : f->plan[i].ranks;
    if (r <= 0) continue;
    copy(out[n].host, sizeof out[n].host, host);
    out[n++].rank_hours = rank_hours * r / ranks;
  }
  return n;
}

void ln_fleet_exposure_record(ln_fleet *f, const char *run_ledger, const ftl_cadence_record *rec) {
  if (!f) return;
  size_t n = f->n_hosts > f->n_plan ? f->n_hosts : f->n_plan;
  ftl_cadence_host_hours *shares = ftl_calloc(n ? n : 1, sizeof *shares);
  n = shares ? exposure_shares(f, rec->rank_hours, shares, n) : 0;
  /* Records of at most FTL_CADENCE_MAX_RECORD_HOSTS hosts, each its hosts' exposure, at successive
   * microseconds (each its own record to a reader that counts a record once); the same ones in
   * both ledgers, so a reader of the two counts each once. */
  size_t pieces = n ? (n + FTL_CADENCE_MAX_RECORD_HOSTS - 1) / FTL_CADENCE_MAX_RECORD_HOSTS : 1;
  for (size_t k = 0; k < pieces; k++) {
    ftl_cadence_record piece = *rec;
    piece.wall_us = rec->wall_us + (int64_t)k;
    piece.hosts = n ? shares + k * FTL_CADENCE_MAX_RECORD_HOSTS : NULL;
    piece.n_hosts = n ? (n - k * FTL_CADENCE_MAX_RECORD_HOSTS < FTL_CADENCE_MAX_RECORD_HOSTS
                             ? n - k * FTL_CADENCE_MAX_RECORD_HOSTS
                             : FTL_CADENCE_MAX_RECORD_HOSTS)
                      : 0;
    if (pieces > 1) {
      piece.rank_hours = 0;
      for (size_t i = 0; i < piece.n_hosts; i++) piece.rank_hours += piece.hosts[i].rank_hours;
    }
    if (run_ledger) append(f, run_ledger, &piece);
    append(f, f->ledger, &piece);
  }
  ftl_free(shares);
}
