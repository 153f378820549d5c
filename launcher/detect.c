/* launcher/detect.c: the failure detectors (see detect.h). Pure: rank state and a clock in, a
 * finding out. */
#include "launcher/detect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftl/core.h"

ln_cadence ln_detect_cadence(int n, const ln_detect_limits *lim, int relayed) {
  int64_t shortest = lim->node_ms;
  const int64_t each[] = {lim->startup_ms, lim->step_ms, lim->checkpoint_ms};
  for (size_t k = 0; k < sizeof each / sizeof *each; k++)
    if (each[k] < shortest) shortest = each[k];
  int64_t cap = shortest / 4;
  int64_t batch = (int64_t)n * 1000 / FTL_CADENCE_BATCH_RANKS_PER_S, ping = (int64_t)n * 1000 / FTL_CADENCE_PING_RANKS_PER_S;
  if (batch > cap) batch = cap;
  if (ping > cap) ping = cap;
  ln_cadence c = {.batch_ms = (int)(batch > FTL_CADENCE_BATCH_FLOOR_MS ? batch : FTL_CADENCE_BATCH_FLOOR_MS),
                  .ping_ms = (int)(ping > FTL_CADENCE_PING_FLOOR_MS ? ping : FTL_CADENCE_PING_FLOOR_MS)};
  c.missed_ms = FTL_DETECT_MISSED_MS + c.batch_ms - FTL_CADENCE_BATCH_FLOOR_MS;
  c.fence_ms = lim->node_ms;
  int64_t relay_ping = (int64_t)n * 1000 / FTL_CADENCE_PING_RANKS_PER_S;
  if (relay_ping > FTL_CADENCE_RELAY_PING_MAX_MS) relay_ping = FTL_CADENCE_RELAY_PING_MAX_MS;
  if (relayed && relay_ping > c.ping_ms) {
    c.ping_ms = (int)relay_ping;
    if (4 * relay_ping > c.fence_ms) c.fence_ms = 4 * relay_ping;
  }
  return c;
}

void ln_detect_note_compute(ln_rank_watch *w, double compute_ms) {
  w->compute_ms[w->compute_count++ % FTL_STRAGGLER_WINDOW] = compute_ms;
}

int64_t ln_detect_section_timeout(const ln_detect_limits *lim, int section) {
  switch (section) {
    case FTL_SECTION_STEP: return lim->step_ms;
    case FTL_SECTION_CHECKPOINT: return lim->checkpoint_ms;
    default: return lim->startup_ms;
  }
}

const char *ln_detect_section_name(int section) {
  return section == FTL_SECTION_STEP ? "step" : section == FTL_SECTION_CHECKPOINT ? "checkpoint" : "start-up";
}

static int same_host(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* 1 when rank a is behind rank b: an earlier last step, or at the same step and not yet through
 * ftl_init where b is. */
static int behind(const ln_rank_watch *a, const ln_rank_watch *b) {
  if (a->last_step != b->last_step) return a->last_step < b->last_step;
  return !a->ready && b->ready;
}

/* A host whose agents have all been silent for timeouts.node_s is lost: the host died or its link
 * is down (a dead TCP peer can take minutes to be noticed by the socket itself). */
int ln_detect_lost_host(const ln_rank_watch *r, int n, const ln_detect_limits *lim, int64_t now_ms,
                         ln_detection *out) {
  int64_t due;
  return ln_detect_lost_host_due(r, n, lim, now_ms, out, &due);
}

int ln_detect_lost_host_due(const ln_rank_watch *r, int n, const ln_detect_limits *lim, int64_t now_ms,
                            ln_detection *out, int64_t *due_ms) {
  int64_t missed_ms = lim->missed_ms > 0 ? lim->missed_ms : FTL_DETECT_MISSED_MS;
  *due_ms = now_ms + lim->node_ms;
  for (int i = 0; i < n; i++) {
    const ln_rank_watch *s = &r[i];
    if (!s->has_agent || s->exited) continue;
    if (now_ms - s->alive_ms < lim->node_ms) {
      if (s->alive_ms + lim->node_ms < *due_ms) *due_ms = s->alive_ms + lim->node_ms;
      continue;
    }
    int silent = 1, ranks_on_host = 0;
    for (int j = 0; j < n; j++) {
      if (!same_host(r[j].host, s->host)) continue;
      ranks_on_host++;
      if (r[j].has_agent && !r[j].exited && now_ms - r[j].alive_ms < missed_ms) silent = 0;
      /* A finished agent's exit report is its host answering: a host heard from within node_s is
       * not lost (the silent agent alone is). */
      if (r[j].exited && r[j].alive_ms > 0 && now_ms - r[j].alive_ms < lim->node_ms) silent = 0;
    }
    double silent_s = (double)(now_ms - s->alive_ms) / 1000.0;
    memset(out, 0, sizeof *out);
    if (silent) {
      out->kind = FTL_FAIL_NODE;
      out->rank = -1;
      out->host = s->host ? s->host : "";
      snprintf(out->message, sizeof out->message, "host %s is lost: none of its %d rank agent%s answered for %.1f s",
               s->host ? s->host : "?", ranks_on_host, ranks_on_host == 1 ? "" : "s", silent_s);
    } else {
      out->kind = FTL_FAIL_AGENT_LOST;
      out->rank = i;
      snprintf(out->message, sizeof out->message,
               "has a silent agent for %.1f s (its process may be stopped or starved)", silent_s);
    }
    return 1;
  }
  return 0;
}

int ln_detect_hang(const ln_rank_watch *r, int n, const ln_detect_limits *lim, int64_t now_ms, ln_detection *out) {
  int64_t due;
  return ln_detect_hang_due(r, n, lim, now_ms, out, &due);
}

/* The shortest silence any rank may be allowed (a report always starts one of these). */
static int64_t shortest_limit(const ln_detect_limits *lim) {
  int64_t m = FTL_DETECT_STOPPED_MS;
  const int64_t each[] = {lim->startup_ms, lim->step_ms, lim->checkpoint_ms};
  for (size_t k = 0; k < sizeof each / sizeof *each; k++)
    if (each[k] < m) m = each[k];
  return m;
}

int ln_detect_hang_due(const ln_rank_watch *r, int n, const ln_detect_limits *lim, int64_t now_ms, ln_detection *out,
                       int64_t *due_ms) {
  int hung = -1, stopped = -1;
  *due_ms = now_ms + shortest_limit(lim);
  for (int i = 0; i < n && hung < 0; i++) {
    if (r[i].exited) continue;
    /* A process seen stopped for a few reports makes no progress until continued: waiting for
     * its section's timeout (minutes for a step) would only add to the loss. */
    if (r[i].state == 'T' && r[i].stopped_ms > 0) {
      if (now_ms - r[i].stopped_ms >= FTL_DETECT_STOPPED_MS) {
        hung = stopped = i;
        break;
      }
      if (r[i].stopped_ms + FTL_DETECT_STOPPED_MS < *due_ms) *due_ms = r[i].stopped_ms + FTL_DETECT_STOPPED_MS;
    }
    /* Only ranks that joined through the library report progress; a program that does not use
     * it has nothing to watch (and one stuck before ftl_init is the rendezvous deadline's). */
    if (r[i].progress_ms == 0) continue;
    int64_t limit = ln_detect_section_timeout(lim, r[i].section);
    if (now_ms - r[i].progress_ms >= limit) hung = i;
    else if (r[i].progress_ms + limit < *due_ms) *due_ms = r[i].progress_ms + limit;
  }
  if (hung < 0) return 0;
  int culprit = stopped;
  for (int i = 0; i < n && culprit < 0; i++)
    if (!r[i].exited && r[i].state == 'T') culprit = i;
  int unpinned = 0;
  if (culprit < 0) {
    culprit = hung;
    for (int i = 0; i < n; i++)
      if (!r[i].exited && behind(&r[i], &r[culprit])) culprit = i;
    /* The rank furthest behind is the one the others wait for only when it is alone there (or its
     * host is): ranks on several hosts stopped at the same point are all waiting, on something no
     * report names, and blaming the first one's host would leave a good host out. */
    for (int i = 0; i < n; i++)
      if (!r[i].exited && !behind(&r[culprit], &r[i]) && !same_host(r[i].host, r[culprit].host)) unpinned = 1;
  }
  const ln_rank_watch *c = &r[culprit];
  int64_t since = c->progress_ms ? c->progress_ms : r[hung].progress_ms;
  memset(out, 0, sizeof *out);
  out->kind = FTL_FAIL_HANG;
  out->rank = culprit;
  out->unpinned = unpinned;
  if (stopped >= 0) {
    char silence[64] = "no progress reported yet";
    if (since) snprintf(silence, sizeof silence, "no progress for %.1f s", (double)(now_ms - since) / 1000.0);
    snprintf(out->message, sizeof out->message,
             "hung: its process is stopped (state T for %.1f s, SIGSTOP or alike); %s in its %s section "
             "(last step %lld; not waiting for the %.1f s timeout)",
             (double)(now_ms - c->stopped_ms) / 1000.0, silence, ln_detect_section_name(c->section),
             (long long)c->last_step, (double)ln_detect_section_timeout(lim, c->section) / 1000.0);
    return 1;
  }
  /* Where in its start-up: MPI's own start is the usual place for a gang to wait forever. */
  const char *where = "";
  if (c->section != FTL_SECTION_STEP && c->section != FTL_SECTION_CHECKPOINT)
    where = c->ready ? ", after ftl_init (restoring or in its first step)"
                     : ", inside ftl_init (joined the rendezvous; MPI_Init or the communicator's set-up never "
                       "finished)";
  snprintf(out->message, sizeof out->message,
           "hung: no progress for %.1f s in its %s section%s (timeout %.1f s; last step %lld%s%s)",
           (double)(now_ms - since) / 1000.0, ln_detect_section_name(c->section), where,
           (double)ln_detect_section_timeout(lim, c->section) / 1000.0, (long long)c->last_step,
           c->state == 'T' ? "; its process is stopped" : "",
           unpinned ? "; ranks on other hosts stopped at the same point, so no host is blamed" : "");
  return 1;
}

/* An agent that went without a word: its connection dropped with neither an exit report nor the
 * word that it was asked to stop. */
static int gone_silently(const ln_rank_watch *w) { return !w->has_agent && !w->exited && w->lost_ns && !w->stopping_ms; }

/* 1 when every agent on host went without a word. */
static int host_gone_silently(const ln_rank_watch *r, int n, const char *host) {
  int on_host = 0;
  for (int i = 0; i < n; i++) {
    if (!same_host(r[i].host, host)) continue;
    on_host++;
    if (!gone_silently(&r[i])) return 0;
  }
  return on_host > 0;
}

/* 1 when host is r[i].host for some i < upto (it was looked at already). */
static int host_seen_before(const ln_rank_watch *r, int upto, const char *host) {
  for (int i = 0; i < upto; i++)
    if (same_host(r[i].host, host)) return 1;
  return 0;
}

/* When one host dies, mpirun (or srun) ends the ranks on the others too, so several hosts' agents
 * vanish within milliseconds, and the order in which one wake-up reads their connections says
 * nothing about which went first. What tells them apart is the word the torn-down agents send
 * before they go: the lost host's agents sent none. The launcher's own host is never the lost one
 * (were it gone, so would be this launcher). */
int ln_detect_vanished(const ln_rank_watch *r, int n, int lost_rank, const char *self_host, ln_detection *out) {
  if (lost_rank < 0) return 0;
  const char *silent_hosts[2] = {NULL, NULL};
  int silent_count = 0, first_silent = -1;
  for (int i = 0; i < n; i++) {
    if (gone_silently(&r[i]) && (first_silent < 0 || r[i].lost_ns < r[first_silent].lost_ns)) first_silent = i;
    if (!r[i].host || same_host(r[i].host, self_host) || host_seen_before(r, i, r[i].host) ||
        !host_gone_silently(r, n, r[i].host))
      continue;
    if (silent_count < 2) silent_hosts[silent_count] = r[i].host;
    silent_count++;
  }
  memset(out, 0, sizeof *out);
  if (silent_count == 1) {
    int on_host = 0, spoke = 0;
    for (int i = 0; i < n; i++) {
      on_host += same_host(r[i].host, silent_hosts[0]);
      spoke += !same_host(r[i].host, silent_hosts[0]) && (r[i].stopping_ms || r[i].exited);
    }
    out->kind = FTL_FAIL_NODE;
    out->rank = -1;
    out->host = silent_hosts[0];
    snprintf(out->message, sizeof out->message,
             "host %s is lost: all %d of its rank agents vanished without a word (%d agent%s elsewhere said why "
             "they stopped)",
             silent_hosts[0], on_host, spoke, spoke == 1 ? "" : "s");
    return 1;
  }
  if (silent_count > 1) {
    out->kind = FTL_FAIL_AGENT_LOST;
    out->rank = first_silent;
    snprintf(out->message, sizeof out->message,
             "lost its agent, and so did every agent of hosts %s and %s%s, all without a word: the evidence cannot "
             "tell which host was lost, so none is left out",
             silent_hosts[0], silent_hosts[1], silent_count > 2 ? " (and others)" : "");
    return 1;
  }
  if (first_silent < 0) return 0; /* every agent that went had said it was asked to stop */
  out->kind = FTL_FAIL_AGENT_LOST;
  out->rank = first_silent;
  snprintf(out->message, sizeof out->message, "lost its agent (the agent process died or its host went away)");
  return 1;
}

/* The median of a window (FTL_STRAGGLER_WINDOW values, sorted in place by insertion: ten values
 * sort faster so than through qsort's calls, and the check runs it for every rank). */
static double median(double *v, int n) {
  for (int i = 1; i < n; i++) {
    double x = v[i];
    int j = i;
    for (; j > 0 && v[j - 1] > x; j--) v[j] = v[j - 1];
    v[j] = x;
  }
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int ln_detect_one_host(const ln_rank_watch *r, int n) {
  const char *first = NULL;
  for (int i = 0; i < n; i++) {
    if (!r[i].host) continue;
    if (!first) first = r[i].host;
    else if (strcmp(first, r[i].host) != 0) return 0;
  }
  return 1;
}

int ln_detect_local_rank(const ln_rank_watch *r, int n, int i) {
  if (i < 0 || i >= n || !r[i].host) return -1;
  int k = 0;
  for (int j = 0; j < i; j++) k += r[j].host && !strcmp(r[j].host, r[i].host);
  return k;
}

/* Puts the k-th smallest of v[0..n) at v[k], the smaller ones before it and the larger after
 * (quickselect, Hoare's partition around the median of three): O(n) on average. */
static void select_kth(double *v, int n, int k) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    double a = v[lo], b = v[mid], c = v[hi];
    double pivot = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
    int i = lo, j = hi;
    while (i <= j) {
      while (v[i] < pivot) i++;
      while (v[j] > pivot) j--;
      if (i <= j) {
        double t = v[i];
        v[i++] = v[j];
        v[j--] = t;
      }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else return;
  }
}

/* The values the others' median is made of: the gang's order statistics k-1, k and k+1 (k: the
 * middle of the n-1 others), found by selection. */
typedef struct middle {
  int m;               /* the others' count, n - 1 */
  double below, at, above; /* sorted[k-1] (when k > 0), sorted[k], sorted[k+1] */
} middle;

static void gang_middle(double *v, int n, middle *out) {
  int m = n - 1, k = m / 2;
  out->m = m;
  select_kth(v, n, k);
  out->at = v[k];
  out->below = out->at;
  for (int i = 0; i < k; i++)
    if (i == 0 || v[i] > out->below) out->below = v[i];
  select_kth(v + k + 1, n - k - 1, 0);
  out->above = v[k + 1];
}

/* The median of the others for a rank whose own value is v: the median of the gang sorted, less
 * one copy of v (equal values are interchangeable, so any copy gives the same median). v sits
 * above sorted[k] exactly when more than k values are smaller than it, so the middle three and one
 * comparison each say which of them the others' median is made of. */
static double median_without(const middle *g, double v) {
  double hi = g->at < v ? g->at : g->above;
  if (g->m % 2) return hi;
  double lo = g->below < v ? g->below : g->at;
  return (lo + hi) / 2;
}

int ln_detect_stragglers(const ln_rank_watch *r, int n, double ratio, ln_straggler *out, int cap) {
  int found = 0;
  if (n < 2) return 0;
  double *per_rank = ftl_calloc((size_t)n, sizeof *per_rank);
  double *sorted = ftl_calloc((size_t)n, sizeof *sorted);
  if (!per_rank || !sorted) goto out;
  for (int i = 0; i < n; i++) {
    if (r[i].compute_count < FTL_STRAGGLER_WINDOW || r[i].exited) goto out; /* every rank needs a full window */
    double w[FTL_STRAGGLER_WINDOW];
    memcpy(w, r[i].compute_ms, sizeof w);
    per_rank[i] = median(w, FTL_STRAGGLER_WINDOW);
  }
  /* The others' median for rank i is the gang's sorted values less one copy of its own: only the
   * middle three of them are ever read, found once for the gang by selection (O(n), not a sort). */
  memcpy(sorted, per_rank, (size_t)n * sizeof *sorted);
  middle g;
  gang_middle(sorted, n, &g);
  for (int i = 0; i < n && found < cap; i++) {
    if (r[i].straggler_reported) continue;
    double typical = median_without(&g, per_rank[i]);
    if (per_rank[i] < ratio * typical || per_rank[i] - typical < FTL_STRAGGLER_MIN_MS) continue;
    out[found++] = (ln_straggler){.rank = i, .compute_ms = per_rank[i], .others_median_ms = typical};
  }
out:
  ftl_free(per_rank);
  ftl_free(sorted);
  return found;
}
