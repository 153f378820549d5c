/* launcher/policy.c: the restart policy (see policy.h for the rules and their order). Pure: the
 * caller passes the history in and gets the next history back with the decision. */
#include "launcher/policy.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

ln_policy_config ln_policy_config_of(const ln_job *job) {
  return (ln_policy_config){.ranks = job->ranks,
                             .min_ranks = job->min_ranks,
                             .max_restarts = job->max_restarts,
                             .crash_loop = job->crash_loop,
                             .backoff_ms = job->backoff_ms,
                             .max_backoff_ms = job->max_backoff_ms,
                             .have_hostfile = job->hostfile != NULL};
}

void ln_policy_state_init(ln_policy_state *s, const ln_policy_config *cfg) {
  memset(s, 0, sizeof *s);
  s->prev_fail_step = INT64_MIN;
  s->backoff_ms = cfg->backoff_ms;
}

const char *ln_policy_stop_name(ln_policy_stop why) {
  switch (why) {
    case FTL_STOP_NONE: return "none";
    case FTL_STOP_SUCCEEDED: return "succeeded";
    case FTL_STOP_PREEMPTED: return "preempted";
    case FTL_STOP_INTERRUPTED: return "interrupted";
    case FTL_STOP_CANNOT_LAUNCH: return "cannot launch";
    case FTL_STOP_WHILE_STOPPING: return "failed while stopping";
    case FTL_STOP_NOT_RETRYABLE: return "not retryable";
    case FTL_STOP_CRASH_LOOP: return "crash loop";
    case FTL_STOP_BUDGET: return "restart budget spent";
    case FTL_STOP_NO_HOSTS: return "not enough hosts";
  }
  return "unknown";
}

int ln_policy_host_matches(const char *entry, const char *name, const char *addrs) {
  if (!strcmp(entry, name)) return 1;
  size_t len = strlen(entry);
  for (const char *p = addrs; p && *p;) {
    size_t n = strcspn(p, " ");
    if (n == len && !strncmp(p, entry, n)) return 1;
    p += n;
    while (*p == ' ') p++;
  }
  return 0;
}

int ln_policy_world_size(const ln_policy_config *cfg, const ln_policy_host *hosts, size_t nhosts, int *world,
                          int *slots) {
  *world = cfg->ranks;
  *slots = 0;
  if (!cfg->have_hostfile) return 0;
  for (size_t i = 0; i < nhosts; i++)
    if (!hosts[i].bad) *slots += hosts[i].slots;
  if (*slots >= cfg->ranks) return 0;
  int min = cfg->min_ranks > 0 ? cfg->min_ranks : cfg->ranks;
  if (*slots < min) return -1;
  *world = *slots;
  return 0;
}

int ln_policy_backoff_signal_exit(int sig) {
  if (sig == SIGTERM || sig == SIGUSR1) return FTL_EXIT_PREEMPTED;
  if (sig == SIGINT) return FTL_EXIT_SIGINT;
  return FTL_EXIT_SIGTERM; /* SIGHUP, and anything else that ends ftl without a clean stop */
}

static void stop(ln_policy_decision *out, ln_policy_stop why, int exit_code) {
  out->action = FTL_POLICY_STOP;
  out->why = why;
  out->exit_code = exit_code;
}

/* The host to blame for res: a lost host, a hung rank's host, or a host already suspect (a
 * straggler ran there) whose rank failed. */
static const char *blamed_host(const ln_attempt_result *res, const char *suspect) {
  if (res->bad_host[0]) return res->bad_host;
  if (res->kind == FTL_FAIL_HANG) return res->root_host_unblamed ? "" : res->root_host;
  if (suspect[0] && !strcmp(suspect, res->root_host)) return res->root_host;
  return "";
}

/* Rule 5b: the degraded hosts of res that still hold slots, each left out while the hosts left keep
 * at least cfg->ranks slots (in res's order: the first reported goes first). Returns the slots
 * left; records every degraded host in out->degraded. */
static int leave_out_degraded(const ln_policy_config *cfg, const ln_attempt_result *res, const ln_policy_host *hosts,
                              size_t nhosts, const char *blame, int slots, ln_policy_decision *out) {
  for (int k = 0; k < res->n_degraded && k < LN_MAX_DEGRADED_HOSTS; k++) {
    const char *name = res->degraded[k].host;
    if (blame[0] && !strcmp(name, blame)) continue; /* already left out by rule 5 */
    int its_slots = 0, lines = 0;
    for (size_t i = 0; i < nhosts; i++)
      if (!hosts[i].bad && !(blame[0] && ln_policy_host_matches(hosts[i].name, blame, res->bad_host_addrs)) &&
          ln_policy_host_matches(hosts[i].name, name, res->degraded[k].addrs)) {
        its_slots += hosts[i].slots;
        lines++;
      }
    if (!lines) continue; /* not in the plan (or already out) */
    int n = out->n_degraded++;
    out->degraded[n].of = k;
    out->degraded[n].left_out = slots - its_slots >= cfg->ranks;
    if (out->degraded[n].left_out) slots -= its_slots;
  }
  return slots;
}

void ln_policy_decide(const ln_policy_config *cfg, const ln_policy_state *history, const ln_attempt_result *res,
                       const ln_policy_host *hosts, size_t nhosts, const char *job_name, const char *run_dir,
                       ln_policy_decision *out) {
  memset(out, 0, sizeof *out);
  out->next = *history;
  out->world_size = cfg->ranks;
  ln_policy_state *next = &out->next;
  char *msg = out->message;
  size_t msz = sizeof out->message;

  switch (res->outcome) {
    case FTL_ATTEMPT_SUCCEEDED:
      snprintf(msg, msz, "job '%s' finished: %s", job_name, res->summary);
      stop(out, FTL_STOP_SUCCEEDED, FTL_EXIT_OK);
      return;
    case FTL_ATTEMPT_PREEMPTED:
      if (res->interrupt_signal == SIGINT) { /* Ctrl-C: the user stopped it, and resumes it by hand */
        snprintf(msg, msz, "job '%s' interrupted: %s; run the same command again to resume", job_name, res->summary);
        stop(out, FTL_STOP_INTERRUPTED, FTL_EXIT_SIGINT);
        return;
      }
      snprintf(msg, msz, "job '%s' %s; run `ftl run` again on %s to resume (exit %d: requeue)", job_name,
               res->summary, run_dir, FTL_EXIT_PREEMPTED);
      stop(out, FTL_STOP_PREEMPTED, FTL_EXIT_PREEMPTED);
      return;
    case FTL_ATTEMPT_INTERRUPTED:
      snprintf(msg, msz, "job '%s' %s%s", job_name, res->summary,
               res->interrupt_signal == SIGINT ? "; run the same command again to resume from the last commit" : "");
      stop(out, FTL_STOP_INTERRUPTED, res->interrupt_signal == SIGINT ? FTL_EXIT_SIGINT : FTL_EXIT_SIGTERM);
      return;
    case FTL_ATTEMPT_LAUNCH_FAILED:
      snprintf(msg, msz, "job '%s' could not start: %s", job_name, res->summary);
      stop(out, FTL_STOP_CANNOT_LAUNCH, FTL_EXIT_LAUNCH);
      return;
    case FTL_ATTEMPT_FAILED:
    case FTL_ATTEMPT_RDZV_FAILED:
      break;
  }

  int failed_exit = res->outcome == FTL_ATTEMPT_RDZV_FAILED ? FTL_EXIT_RDZV : FTL_EXIT_JOB_FAILED;
  if (res->interrupt_signal) {
    /* Asked to stop (a preemption) and a rank failed on the way out: never relaunch a job the
     * scheduler is taking away. The last committed checkpoint is what a rerun resumes from. */
    snprintf(msg, msz, "job '%s' failed while stopping on signal %d: %s", job_name, res->interrupt_signal,
             res->summary);
    stop(out, FTL_STOP_WHILE_STOPPING, FTL_EXIT_SIGTERM);
    return;
  }
  if (!res->retryable) {
    snprintf(msg, msz, "job '%s' failed: %s; not restarted (a restart cannot fix this)", job_name, res->summary);
    stop(out, FTL_STOP_NOT_RETRYABLE, res->kind == FTL_FAIL_EXEC ? FTL_EXIT_LAUNCH : failed_exit);
    return;
  }

  /* "The same step" is judged by progress. For a program that checkpoints through ftl, progress
   * is a newer committed checkpoint (what a restart keeps); otherwise the highest step reported
   * (at most every 250 ms, so "the same" is within that resolution). An attempt that fails
   * without getting past the previous failure adds to the loop; one that got further starts it
   * over, and so does the back-off: these are independent failures, not one that keeps coming
   * back. */
  int64_t kept = res->committed_step > res->restored_step ? res->committed_step : res->restored_step;
  int64_t reached = kept >= 0 ? kept : res->last_step;
  next->same_step_failures = reached <= history->prev_fail_step ? history->same_step_failures + 1 : 1;
  if (reached > history->prev_fail_step) {
    next->prev_fail_step = reached;
    next->backoff_ms = cfg->backoff_ms;
  }
  if (next->same_step_failures >= cfg->crash_loop) {
    if (res->last_step < 0) /* no step reported: a program that reports none, or one failing before */
      snprintf(msg, msz,
               "job '%s' failed: crash loop: %d attempts in a row failed before any step was reported (steps: not "
               "reported; a program that does not call ftl_step_done cannot show it got further); last failure: %s",
               job_name, next->same_step_failures, res->summary);
    else
      snprintf(msg, msz,
               "job '%s' failed: crash loop: %d attempts in a row failed at step %lld without getting further; "
               "last failure: %s",
               job_name, next->same_step_failures, (long long)res->last_step, res->summary);
    stop(out, FTL_STOP_CRASH_LOOP, failed_exit);
    return;
  }
  if (history->restarts >= cfg->max_restarts) {
    snprintf(msg, msz, "job '%s' failed: %s; the restart budget (%d) is spent", job_name, res->summary,
             cfg->max_restarts);
    stop(out, FTL_STOP_BUDGET, failed_exit);
    return;
  }

  if (res->suspect_host[0]) snprintf(next->suspect, sizeof next->suspect, "%s", res->suspect_host);
  const char *blame = blamed_host(res, next->suspect);
  snprintf(out->exclude_host, sizeof out->exclude_host, "%s", blame);
  int slots = 0;
  for (size_t i = 0; i < nhosts; i++) {
    if (hosts[i].bad) continue;
    if (blame[0] && ln_policy_host_matches(hosts[i].name, blame, res->bad_host_addrs)) out->excluded++;
    else slots += hosts[i].slots;
  }
  if (cfg->have_hostfile && slots >= cfg->ranks) slots = leave_out_degraded(cfg, res, hosts, nhosts, blame, slots, out);
  out->slots = slots;
  if (cfg->have_hostfile && slots < cfg->ranks) {
    int min = cfg->min_ranks > 0 ? cfg->min_ranks : cfg->ranks;
    if (slots < min) {
      snprintf(msg, msz, "job '%s' cannot go on: the hosts left hold %d slot%s, fewer than the %d ranks it needs%s",
               job_name, slots, slots == 1 ? "" : "s", min, cfg->min_ranks > 0 ? " (min_ranks)" : "");
      stop(out, FTL_STOP_NO_HOSTS, failed_exit);
      return;
    }
    out->world_size = slots;
  }

  next->restarts = history->restarts + 1;
  out->action = FTL_POLICY_RESTART;
  out->why = FTL_STOP_NONE;
  out->backoff_ms = next->backoff_ms;
  next->backoff_ms = next->backoff_ms * 2 < cfg->max_backoff_ms ? next->backoff_ms * 2 : cfg->max_backoff_ms;
  snprintf(msg, msz, "failed (%s); restart %d of %d in %.1f s", ln_failure_kind_name(res->kind),
           next->restarts, cfg->max_restarts, (double)out->backoff_ms / 1000.0);
}

void ln_policy_apply_hosts(const ln_policy_decision *dec, const ln_attempt_result *res, ln_policy_host *hosts,
                            size_t nhosts) {
  for (size_t i = 0; i < nhosts; i++) {
    if (hosts[i].bad) continue;
    if (dec->exclude_host[0] && ln_policy_host_matches(hosts[i].name, dec->exclude_host, res->bad_host_addrs))
      hosts[i].bad = 1;
    for (int k = 0; k < dec->n_degraded && !hosts[i].bad; k++) {
      int of = dec->degraded[k].of;
      if (dec->degraded[k].left_out &&
          ln_policy_host_matches(hosts[i].name, res->degraded[of].host, res->degraded[of].addrs))
        hosts[i].bad = 1;
    }
  }
}
