/* launcher/detect.c: the failure detectors (see detect.h). Pure: rank state and a clock in, a
 * finding out. */
#include "launcher/detect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftl/core.h"

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

/* A host whose agents have all been silent for timeouts.node_s is lost: the host died or its link
 * is down (a dead TCP peer can take minutes to be noticed by the socket itself). */
int ln_detect_lost_host(const ln_rank_watch *r, int n, const ln_detect_limits *lim, int64_t now_ms,
                         ln_detection *out) {
  for (int i = 0; i < n; i++) {
    const ln_rank_watch *s = &r[i];
    if (!s->has_agent || s->exited || now_ms - s->alive_ms < lim->node_ms) continue;
    int silent = 1, ranks_on_host = 0;
    for (int j = 0; j < n; j++) {
      if (!same_host(r[j].host, s->host)) continue;
      ranks_on_host++;
      if (r[j].has_agent && !r[j].exited && now_ms - r[j].alive_ms < FTL_DETECT_MISSED_MS) silent = 0;
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
  int hung = -1, stopped = -1;
  for (int i = 0; i < n && hung < 0; i++) {
    /* A process seen stopped for a few reports makes no progress until continued: waiting for
     * its section's timeout (minutes for a step) would only add to the loss. */
    if (!r[i].exited && r[i].state == 'T' && r[i].stopped_ms > 0 && now_ms - r[i].stopped_ms >= FTL_DETECT_STOPPED_MS) {
      hung = stopped = i;
      break;
    }
    /* Only ranks that joined through the library report progress; a program that does not use
     * it has nothing to watch (and one stuck before ftl_init is the rendezvous deadline's). */
    if (r[i].exited || r[i].progress_ms == 0) continue;
    if (now_ms - r[i].progress_ms >= ln_detect_section_timeout(lim, r[i].section)) hung = i;
  }
  if (hung < 0) return 0;
  int culprit = stopped;
  for (int i = 0; i < n && culprit < 0; i++)
    if (!r[i].exited && r[i].state == 'T') culprit = i;
  if (culprit < 0) {
    culprit = hung;
    for (int i = 0; i < n; i++)
      if (!r[i].exited && r[i].last_step < r[culprit].last_step) culprit = i;
  }
  const ln_rank_watch *c = &r[culprit];
  int64_t since = c->progress_ms ? c->progress_ms : r[hung].progress_ms;
  memset(out, 0, sizeof *out);
  out->kind = FTL_FAIL_HANG;
  out->rank = culprit;
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
  snprintf(out->message, sizeof out->message,
           "hung: no progress for %.1f s in its %s section (timeout %.1f s; last step %lld%s)",
           (double)(now_ms - since) / 1000.0, ln_detect_section_name(c->section),
           (double)ln_detect_section_timeout(lim, c->section) / 1000.0, (long long)c->last_step,
           c->state == 'T' ? "; its process is stopped" : "");
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

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
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

/* The median of sorted[0..n-1] without the element at index skip (n >= 2): what sorting the other
 * ranks' values would give, in O(1), so a gang of thousands is not sorted once per rank. */
static double median_without(const double *sorted, int n, int skip) {
  int m = n - 1;
  int k = m / 2;
  double hi = sorted[k < skip ? k : k + 1];
  if (m % 2) return hi;
  double lo = sorted[k - 1 < skip ? k - 1 : k];
  return (lo + hi) / 2;
}

/* Where value v sits in sorted[0..n-1] (the first index holding it). */
static int position_of(const double *sorted, int n, double v) {
  int lo = 0, hi = n;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (sorted[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
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
  /* One sort for the gang: the others' median for rank i is the sorted values less one copy of
   * its own (equal values are interchangeable, so any copy gives the same median). */
  memcpy(sorted, per_rank, (size_t)n * sizeof *sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
  for (int i = 0; i < n && found < cap; i++) {
    if (r[i].straggler_reported) continue;
    double typical = median_without(sorted, n, position_of(sorted, n, per_rank[i]));
    if (per_rank[i] < ratio * typical || per_rank[i] - typical < FTL_STRAGGLER_MIN_MS) continue;
    out[found++] = (ln_straggler){.rank = i, .compute_ms = per_rank[i], .others_median_ms = typical};
  }
out:
  ftl_free(per_rank);
  ftl_free(sorted);
  return found;
}
