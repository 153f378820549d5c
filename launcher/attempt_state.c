/* launcher/attempt_state.c: the attempt's phases, the judging of exit reports and the attempt's
 * conclusion (see attempt_state.h). Pure: no I/O, no clock. */
#include "launcher/attempt_state.h"

#include <signal.h>
#include <stdio.h>

#include "core/failure_record.h"

/* The ledger's name of a cause: core's one table (core/failure_record.c); the enum follows the
 * same map's order (launcher/launcher.h). Here, with the other pure judging of an attempt, so the
 * policy and the fleet plan name causes without calling into supervise.c. */
const char *ln_failure_kind_name(ln_failure_kind kind) {
  const char *name = core_failure_cause_name((int)kind);
  return name ? name : "unknown";
}

const char *ln_phase_name(ln_attempt_phase p) {
  static const char *const names[] = {"launching", "rendezvous", "running", "stopping", "ending", "draining", "ended"};
  return (size_t)p < sizeof names / sizeof *names ? names[p] : "unknown";
}

int ln_phase_was(const ln_phases *s, ln_attempt_phase p) { return (s->seen >> p) & 1u; }

int ln_phase_enter(ln_phases *s, ln_attempt_phase p) {
  s->seen |= 1u << p;
  if (p == s->phase || (p < s->phase && s->phase >= LN_PHASE_STOPPING)) return 0;
  s->phase = p;
  return 1;
}

ln_attempt_phase ln_life_phase(ln_attempt_phase now, int joined, int went, int agents_up, int world) {
  if (now >= LN_PHASE_STOPPING) return now;
  if (joined > 0 && !went) return LN_PHASE_RENDEZVOUS;
  if (agents_up >= world) return LN_PHASE_RUNNING;
  return now;
}

const char *ln_signal_name(int sig) {
  switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGSTOP: return "SIGSTOP";
    default: return "signal";
  }
}

const char *ln_outcome_name(ln_attempt_outcome o) {
  switch (o) {
    case FTL_ATTEMPT_SUCCEEDED: return "succeeded";
    case FTL_ATTEMPT_FAILED: return "failed";
    case FTL_ATTEMPT_RDZV_FAILED: return "rendezvous_failed";
    case FTL_ATTEMPT_LAUNCH_FAILED: return "launch_failed";
    case FTL_ATTEMPT_INTERRUPTED: return "interrupted";
    case FTL_ATTEMPT_PREEMPTED: return "preempted";
  }
  return "unknown";
}

ln_exit_verdict ln_judge_exit(const ln_exit_report *r) {
  int failed = r->exit_code != 0 || r->signal != 0;
  if (!failed) return LN_EXIT_CLEAN;
  int by_term = r->signal == SIGTERM || r->exit_code == 128 + SIGTERM;
  /* Once we end the gang, ranks dying of our TERM/KILL are consequences, not causes; so is a death
   * by SIGINT then (Ctrl-C also reaches a rank that shares the terminal's process group). */
  int by_int = r->signal == SIGINT || r->exit_code == 128 + SIGINT;
  int consequence = r->ending && (r->signal == SIGTERM || r->signal == SIGKILL || r->exit_code == 128 + SIGTERM);
  consequence |= (r->ending || r->stopping) && by_int;
  /* After a stop before the gang formed, every exit (a joined rank's failed ftl_init too) is ours. */
  consequence |= r->early_stop;
  /* During a preemption, a rank killed by the same outside SIGTERM (Slurm signals every process of
   * the job, not only ftl) is part of the stop, not a failure of its own. */
  consequence |= r->stopping && by_term;
  if (consequence) return LN_EXIT_CONSEQUENCE;
  int outside_term = !r->exec_error && by_term;
  /* A rank that fails while an agent has vanished may be failing because of it (its MPI peer on a
   * lost host is gone): held too, so the lost host, if that is what it is, is the cause. */
  int after_loss = !r->exec_error && r->agent_lost;
  if ((outside_term || after_loss) && !r->have_root) return LN_EXIT_HELD;
  return LN_EXIT_ROOT;
}

int ln_held_death_was_stop(int stopping, int early_stop, int interrupt_signal) {
  return stopping || early_stop || interrupt_signal != 0;
}

void ln_root_how(char *buf, size_t size, const char *how_override, int code, int sig) {
  if (how_override) snprintf(buf, size, "%s", how_override);
  else if (sig) snprintf(buf, size, "was killed by signal %d (%s)", sig, ln_signal_name(sig));
  else snprintf(buf, size, "exited with code %d", code);
}

void ln_conclude(const ln_conclusion_in *in, ln_conclusion *out) {
  out->kind = LN_CONCLUDE_SET;
  out->outcome = in->outcome;
  out->summary[0] = '\0';
  if (in->outcome == FTL_ATTEMPT_RDZV_FAILED || in->outcome == FTL_ATTEMPT_LAUNCH_FAILED) {
    out->kind = LN_CONCLUDE_KEEP;
    return;
  }
  const char *sig = ln_signal_name(in->interrupt_signal);
  if (in->early_stop) {
    out->outcome = FTL_ATTEMPT_PREEMPTED;
    snprintf(out->summary, sizeof out->summary,
             "stopped cleanly on %s before the gang formed: no rank had started training, nothing was lost", sig);
    return;
  }
  if (in->stopping && !in->have_root && in->all_zero) {
    out->outcome = FTL_ATTEMPT_PREEMPTED;
    snprintf(out->summary, sizeof out->summary, "stopped cleanly on %s after step %lld (checkpoint committed at step %lld)",
             sig, (long long)in->last_step, (long long)in->committed_step);
    return;
  }
  if (in->interrupt_signal && !(in->have_root && in->stopping)) {
    out->outcome = FTL_ATTEMPT_INTERRUPTED;
    snprintf(out->summary, sizeof out->summary, "stopped by %s; the ranks were stopped", sig);
    return;
  }
  if (in->have_root) {
    out->kind = LN_CONCLUDE_KEEP;
    return;
  }
  if (in->mpirun_code != 0 || !in->all_zero) {
    out->kind = LN_CONCLUDE_LAUNCHER;
    out->outcome = FTL_ATTEMPT_FAILED;
    if (in->first_missing >= 0)
      snprintf(out->summary, sizeof out->summary,
               "mpirun exited with code %d and rank %d never reported an exit (host %s)", in->mpirun_code,
               in->first_missing, in->first_missing_host ? in->first_missing_host : "unknown");
    else
      snprintf(out->summary, sizeof out->summary, "mpirun exited with code %d", in->mpirun_code);
    return;
  }
  out->outcome = FTL_ATTEMPT_SUCCEEDED;
  snprintf(out->summary, sizeof out->summary, "all %d rank%s exited 0", in->world, in->world == 1 ? "" : "s");
}
