/* launcher/fleet_plan.c: the fleet's history before a job's first attempt (launcher/fleet.h): the
 * pure decision (which hosts of the hostfile plan are left out, kept in spite of a bad history, or
 * moved behind the spares) and its carrying out on the plan, with a console line per host and one
 * `fleet_hosts` event. The rules and why: docs/formats/fleet-ledger.md, "Per-host history". */
#include <stdio.h>
#include <string.h>

#include "ftl/core.h"
#include "launcher/fleet.h"
#include "launcher/fleet_internal.h"

/* The summary of the history that names this plan entry, by name or by one of its addresses. */
static const ftl_cadence_fleet_host *find(const ftl_cadence_fleet_hosts *hist, const ln_policy_host *h) {
  for (size_t i = 0; hist && i < hist->count; i++)
    if (ln_policy_host_matches(h->name, hist->hosts[i].host, hist->hosts[i].addrs)) return &hist->hosts[i];
  return NULL;
}

int ln_fleet_decide(const ln_policy_host *hosts, size_t n, int ranks, const ftl_cadence_fleet_hosts *hist,
                    ln_fleet_action *action, const ftl_cadence_fleet_host **match, size_t *order) {
  long slots = 0;
  int decided = 0;
  for (size_t i = 0; i < n; i++) {
    action[i] = LN_FLEET_KEEP;
    match[i] = hosts[i].bad ? NULL : find(hist, &hosts[i]);
    if (!hosts[i].bad) slots += hosts[i].slots;
  }
  /* Bad hosts, worst first (the history's order), each left out while the others hold the ranks. */
  for (size_t k = 0; hist && k < hist->count; k++) {
    if (hist->hosts[k].standing != FTL_CADENCE_HOST_BAD) break;
    for (size_t i = 0; i < n; i++) {
      if (match[i] != &hist->hosts[k] || action[i] != LN_FLEET_KEEP) continue;
      decided++;
      if (slots - hosts[i].slots >= ranks) {
        action[i] = LN_FLEET_LEFT_OUT;
        slots -= hosts[i].slots;
      } else {
        action[i] = LN_FLEET_KEPT_BAD;
      }
    }
  }
  for (size_t i = 0; i < n; i++)
    if (match[i] && match[i]->standing == FTL_CADENCE_HOST_DEGRADED) {
      action[i] = LN_FLEET_MOVED;
      decided++;
    }
  /* The new order: the others as they were, then the degraded, then the bad ones kept: mpirun fills
   * slots in order, so the hosts at the end are the spares. */
  size_t m = 0;
  const ln_fleet_action groups[3] = {LN_FLEET_KEEP, LN_FLEET_MOVED, LN_FLEET_KEPT_BAD};
  for (int g = 0; g < 3; g++)
    for (size_t i = 0; i < n; i++)
      if (action[i] == groups[g] || (g == 0 && action[i] == LN_FLEET_LEFT_OUT)) order[m++] = i;
  return decided;
}

void ln_fleet_ago(char *buf, size_t size, int64_t now_us, int64_t at_us) {
  double s = (double)(now_us - at_us) / 1e6;
  if (s < 0) s = 0;
  /* cut at worst: only a message */
  if (at_us <= 0)
    (void)ftl_fmt(buf, size, "-");
  else if (s < 90)
    (void)ftl_fmt(buf, size, "%.0f s ago", s);
  else if (s < 90 * 60)
    (void)ftl_fmt(buf, size, "%.0f min ago", s / 60);
  else if (s < 48 * 3600)
    (void)ftl_fmt(buf, size, "%.0f h ago", s / 3600);
  else
    (void)ftl_fmt(buf, size, "%.0f days ago", s / 86400);
}

void ln_fleet_describe(const ftl_cadence_fleet_host *h, int64_t now_us, char *buf, size_t size) {
  char ago[48] = "";
  if (h->bad_since_us > 0) ln_fleet_ago(ago, sizeof ago, now_us, h->bad_since_us);
  /* cut at worst: only a message */
  (void)ftl_fmt(buf, size, "%s%s%s%s%s", h->reason, ago[0] ? " " : "", ago, h->job[0] ? " in job " : "", h->job);
}

static const char *action_name(ln_fleet_action a) {
  switch (a) {
    case LN_FLEET_KEEP: return "kept";
    case LN_FLEET_LEFT_OUT: return "left_out";
    case LN_FLEET_KEPT_BAD: return "kept_bad";
    case LN_FLEET_MOVED: return "moved";
  }
  return "kept";
}

/* The console line and the event's entry of one host the decision touched. slots: what the hosts
 * not left out hold; others: what those of them that are not degraded or bad hold. */
static void say(const ln_policy_host *h, ln_fleet_action a, const ftl_cadence_fleet_host *s, int ranks, long slots,
                long others, int64_t now_us, json_t *list) {
  char why[512];
  ln_fleet_describe(s, now_us, why, sizeof why);
  if (a == LN_FLEET_LEFT_OUT)
    fprintf(stderr, "ftl: host %s left out: %s\n", h->name, why);
  else if (a == LN_FLEET_MOVED && others >= ranks)
    fprintf(stderr, "ftl: host %s moved behind the spares: %s\n", h->name, why);
  else if (a == LN_FLEET_MOVED)
    fprintf(stderr, "ftl: host %s moved to the end of the hostfile (the hosts before it hold %ld of the %d ranks): "
            "%s\n", h->name, others, ranks, why);
  else
    fprintf(stderr, "ftl: host %s kept although its history is bad (%s): without it the hosts hold %ld slots, "
            "fewer than the job's %d ranks\n", h->name, why, slots - h->slots, ranks);
  json_t *e = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "host", h->name, "action", action_name(a), "standing",
                        ftl_cadence_host_standing_name(s->standing), "reason", s->reason, "job", s->job, "since_us",
                        (json_int_t)s->bad_since_us);
  if (e && s->host[0] && strcmp(s->host, h->name)) json_object_set_new(e, "history_host", json_string(s->host));
  if (e) json_array_append_new(list, e);
}

void ln_fleet_plan_start(ln_fleet *f, const ln_job *job, ln_policy_host *hosts, size_t n, ln_events *events,
                         int attempt) {
  if (!f || !f->have_hist || n == 0) return;
  ln_fleet_action *action = ftl_calloc(n, sizeof *action);
  const ftl_cadence_fleet_host **match = ftl_calloc(n, sizeof *match);
  size_t *order = ftl_calloc(n, sizeof *order);
  ln_policy_host *copy = ftl_calloc(n, sizeof *copy);
  json_t *list = json_array();
  if (!action || !match || !order || !copy || !list) {
    FTL_LOG(FTL_LOG_WARN, "launcher", "out of memory: the fleet's host history is not applied");
    goto out;
  }
  if (ln_fleet_decide(hosts, n, job->ranks, &f->hist, action, match, order) == 0) goto out;
  long slots = 0, others = 0;
  for (size_t i = 0; i < n; i++) {
    if (!hosts[i].bad && action[i] != LN_FLEET_LEFT_OUT) slots += hosts[i].slots;
    if (!hosts[i].bad && action[i] == LN_FLEET_KEEP) others += hosts[i].slots;
  }
  int64_t now_us = ftl_wall_us();
  int counts[4] = {0};
  for (size_t i = 0; i < n; i++) {
    counts[action[i]]++;
    if (action[i] != LN_FLEET_KEEP) say(&hosts[i], action[i], match[i], job->ranks, slots, others, now_us, list);
    if (action[i] == LN_FLEET_LEFT_OUT) hosts[i].bad = 1;
  }
  memcpy(copy, hosts, n * sizeof *copy);
  for (size_t i = 0; i < n; i++) hosts[i] = copy[order[i]];
  ln_events_write(events, "fleet_hosts", attempt,
                  json_pack("{s:i, s:i, s:i, s:i, s:O}", "history_days", f->history_days, "left_out",
                            counts[LN_FLEET_LEFT_OUT], "moved", counts[LN_FLEET_MOVED], "kept_bad",
                            counts[LN_FLEET_KEPT_BAD], "hosts", list));
out:
  json_decref(list);
  ftl_free(action);
  ftl_free(match);
  ftl_free(order);
  ftl_free(copy);
}
