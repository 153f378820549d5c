/* tests/launcher/test_attempt_state.c: the attempt's state machine and root-cause rules
 * (launcher/attempt_state.c), pure: phase transitions, how an exit report is judged in each
 * phase, and the attempt's conclusion once mpirun is gone. */
#include <signal.h>

#include "ftl_test.h"
#include "launcher/attempt_state.h"

static void phases(void) {
  ln_phases s = LN_PHASES_INIT;
  CHECK_INT_EQ(s.phase, LN_PHASE_LAUNCHING);
  CHECK(ln_phase_was(&s, LN_PHASE_LAUNCHING));
  CHECK(!ln_phase_was(&s, LN_PHASE_RUNNING));
  CHECK_INT_EQ(ln_phase_enter(&s, LN_PHASE_RENDEZVOUS), 1);
  CHECK_INT_EQ(ln_phase_enter(&s, LN_PHASE_RENDEZVOUS), 0); /* no change: nothing to log */
  CHECK_INT_EQ(ln_phase_enter(&s, LN_PHASE_RUNNING), 1);
  CHECK_INT_EQ(ln_phase_enter(&s, LN_PHASE_RENDEZVOUS), 1); /* the life phases may alternate */
  CHECK_INT_EQ(ln_phase_enter(&s, LN_PHASE_STOPPING), 1);
  CHECK_INT_EQ(ln_phase_enter(&s, LN_PHASE_RUNNING), 0); /* never back once stopping */
  CHECK_INT_EQ(s.phase, LN_PHASE_STOPPING);
  CHECK_INT_EQ(ln_phase_enter(&s, LN_PHASE_ENDING), 1);
  CHECK_INT_EQ(ln_phase_enter(&s, LN_PHASE_STOPPING), 0); /* a stop asked for while ending: remembered */
  CHECK_INT_EQ(s.phase, LN_PHASE_ENDING);
  CHECK(ln_phase_was(&s, LN_PHASE_STOPPING));
  CHECK_INT_EQ(ln_phase_enter(&s, LN_PHASE_DRAINING), 1);
  CHECK_INT_EQ(ln_phase_enter(&s, LN_PHASE_ENDED), 1);
  CHECK_STR_EQ(ln_phase_name(LN_PHASE_DRAINING), "draining");
  CHECK_STR_EQ(ln_phase_name((ln_attempt_phase)99), "unknown");

  /* life phases: joined and not gone -> rendezvous; all agents up -> running; else unchanged */
  CHECK_INT_EQ(ln_life_phase(LN_PHASE_LAUNCHING, 1, 0, 0, 4), LN_PHASE_RENDEZVOUS);
  CHECK_INT_EQ(ln_life_phase(LN_PHASE_LAUNCHING, 0, 0, 3, 4), LN_PHASE_LAUNCHING);
  CHECK_INT_EQ(ln_life_phase(LN_PHASE_RENDEZVOUS, 4, 1, 4, 4), LN_PHASE_RUNNING);
  CHECK_INT_EQ(ln_life_phase(LN_PHASE_STOPPING, 1, 0, 4, 4), LN_PHASE_STOPPING);
  CHECK_INT_EQ(ln_life_phase(LN_PHASE_ENDING, 0, 0, 4, 4), LN_PHASE_ENDING);
}

static ln_exit_verdict judge(int code, int sig, int exec_error, int ending, int stopping, int early, int lost, int root) {
  ln_exit_report r = {code, sig, exec_error, ending, stopping, early, lost, root};
  return ln_judge_exit(&r);
}

static void exit_reports(void) {
  CHECK_INT_EQ(judge(0, 0, 0, 0, 0, 0, 0, 0), LN_EXIT_CLEAN);
  CHECK_INT_EQ(judge(0, 0, 0, 1, 1, 1, 1, 1), LN_EXIT_CLEAN);
  /* a crash of its own */
  CHECK_INT_EQ(judge(3, 0, 0, 0, 0, 0, 0, 0), LN_EXIT_ROOT);
  CHECK_INT_EQ(judge(0, SIGSEGV, 0, 0, 0, 0, 0, 0), LN_EXIT_ROOT);
  CHECK_INT_EQ(judge(127, 0, 1, 0, 0, 0, 0, 0), LN_EXIT_ROOT);
  /* ftl ending the gang: its TERM and KILL deaths are consequences, a crash still is not */
  CHECK_INT_EQ(judge(0, SIGTERM, 0, 1, 0, 0, 0, 0), LN_EXIT_CONSEQUENCE);
  CHECK_INT_EQ(judge(0, SIGKILL, 0, 1, 0, 0, 0, 0), LN_EXIT_CONSEQUENCE);
  CHECK_INT_EQ(judge(128 + SIGTERM, 0, 0, 1, 0, 0, 0, 0), LN_EXIT_CONSEQUENCE);
  CHECK_INT_EQ(judge(0, SIGSEGV, 0, 1, 0, 0, 0, 0), LN_EXIT_ROOT);
  /* a stop before the gang formed: every exit is ours */
  CHECK_INT_EQ(judge(1, 0, 0, 0, 0, 1, 0, 0), LN_EXIT_CONSEQUENCE);
  /* a preemption: the outside SIGTERM's deaths are part of it; SIGKILL is not */
  CHECK_INT_EQ(judge(0, SIGTERM, 0, 0, 1, 0, 0, 0), LN_EXIT_CONSEQUENCE);
  CHECK_INT_EQ(judge(0, SIGKILL, 0, 0, 1, 0, 0, 0), LN_EXIT_ROOT);
  /* Ctrl-C: a rank dying of SIGINT while ftl stops or ends the gang is part of it; alone, not */
  CHECK_INT_EQ(judge(0, SIGINT, 0, 0, 1, 0, 0, 0), LN_EXIT_CONSEQUENCE);
  CHECK_INT_EQ(judge(128 + SIGINT, 0, 0, 1, 0, 0, 0, 0), LN_EXIT_CONSEQUENCE);
  CHECK_INT_EQ(judge(0, SIGINT, 0, 0, 0, 0, 0, 0), LN_EXIT_ROOT);
  /* an outside SIGTERM, or any failure while an agent vanished: held (a lost host may be why) */
  CHECK_INT_EQ(judge(0, SIGTERM, 0, 0, 0, 0, 0, 0), LN_EXIT_HELD);
  CHECK_INT_EQ(judge(128 + SIGTERM, 0, 0, 0, 0, 0, 0, 0), LN_EXIT_HELD);
  CHECK_INT_EQ(judge(1, 0, 0, 0, 0, 0, 1, 0), LN_EXIT_HELD);
  CHECK_INT_EQ(judge(1, 0, 0, 0, 0, 0, 1, 1), LN_EXIT_ROOT); /* a root is known: nothing to hold for */
  CHECK_INT_EQ(judge(127, 0, 1, 0, 0, 0, 1, 0), LN_EXIT_ROOT); /* a program that cannot start is never held */
  CHECK(ln_held_death_was_stop(1, 0, 0));
  CHECK(ln_held_death_was_stop(0, 1, 0));
  CHECK(ln_held_death_was_stop(0, 0, SIGTERM));
  CHECK(!ln_held_death_was_stop(0, 0, 0));
  char how[128];
  ln_root_how(how, sizeof how, NULL, 0, SIGKILL);
  CHECK_STR_EQ(how, "was killed by signal 9 (SIGKILL)");
  ln_root_how(how, sizeof how, NULL, 3, 0);
  CHECK_STR_EQ(how, "exited with code 3");
  ln_root_how(how, sizeof how, "hung", 3, 9);
  CHECK_STR_EQ(how, "hung");
  CHECK_STR_EQ(ln_signal_name(SIGUSR1), "SIGUSR1");
  CHECK_STR_EQ(ln_signal_name(SIGWINCH), "signal");
  CHECK_STR_EQ(ln_outcome_name(FTL_ATTEMPT_RDZV_FAILED), "rendezvous_failed");
  CHECK_STR_EQ(ln_outcome_name(FTL_ATTEMPT_PREEMPTED), "preempted");
}

static void conclusions(void) {
  ln_conclusion c;
  ln_conclusion_in base = {.outcome = FTL_ATTEMPT_SUCCEEDED, .world = 2, .all_zero = 1, .first_missing = -1,
                           .last_step = 40, .committed_step = 30};
  ln_conclusion_in in = base;
  ln_conclude(&in, &c);
  CHECK_INT_EQ(c.kind, LN_CONCLUDE_SET);
  CHECK_INT_EQ(c.outcome, FTL_ATTEMPT_SUCCEEDED);
  CHECK_STR_EQ(c.summary, "all 2 ranks exited 0");
  in.world = 1;
  ln_conclude(&in, &c);
  CHECK_STR_EQ(c.summary, "all 1 rank exited 0");

  in = base; /* a failed rendezvous or launch stays as it was */
  in.outcome = FTL_ATTEMPT_RDZV_FAILED;
  in.early_stop = 1;
  ln_conclude(&in, &c);
  CHECK_INT_EQ(c.kind, LN_CONCLUDE_KEEP);

  in = base;
  in.early_stop = 1;
  in.interrupt_signal = SIGTERM;
  ln_conclude(&in, &c);
  CHECK_INT_EQ(c.outcome, FTL_ATTEMPT_PREEMPTED);
  CHECK_STR_CONTAINS(c.summary, "stopped cleanly on SIGTERM before the gang formed");

  in = base;
  in.stopping = 1;
  in.interrupt_signal = SIGUSR1;
  ln_conclude(&in, &c);
  CHECK_INT_EQ(c.outcome, FTL_ATTEMPT_PREEMPTED);
  CHECK_STR_EQ(c.summary, "stopped cleanly on SIGUSR1 after step 40 (checkpoint committed at step 30)");

  in.all_zero = 0; /* a stop the ranks did not finish cleanly: interrupted */
  ln_conclude(&in, &c);
  CHECK_INT_EQ(c.outcome, FTL_ATTEMPT_INTERRUPTED);
  CHECK_STR_EQ(c.summary, "stopped by SIGUSR1; the ranks were stopped");

  in.have_root = 1; /* a failure during the stop: the root cause stands */
  ln_conclude(&in, &c);
  CHECK_INT_EQ(c.kind, LN_CONCLUDE_KEEP);

  in = base;
  in.interrupt_signal = SIGINT;
  in.have_root = 1; /* SIGINT with a root: interrupted all the same (not a stop) */
  ln_conclude(&in, &c);
  CHECK_INT_EQ(c.outcome, FTL_ATTEMPT_INTERRUPTED);

  in = base;
  in.have_root = 1;
  ln_conclude(&in, &c);
  CHECK_INT_EQ(c.kind, LN_CONCLUDE_KEEP);

  in = base;
  in.mpirun_code = 1;
  ln_conclude(&in, &c);
  CHECK_INT_EQ(c.kind, LN_CONCLUDE_LAUNCHER);
  CHECK_STR_EQ(c.summary, "mpirun exited with code 1");
  in.all_zero = 0;
  in.first_missing = 1;
  in.first_missing_host = "h2";
  ln_conclude(&in, &c);
  CHECK_STR_EQ(c.summary, "mpirun exited with code 1 and rank 1 never reported an exit (host h2)");
  in.first_missing_host = NULL;
  in.mpirun_code = 0; /* mpirun 0 but a rank never reported: still the launcher's failure */
  ln_conclude(&in, &c);
  CHECK_STR_EQ(c.summary, "mpirun exited with code 0 and rank 1 never reported an exit (host unknown)");
}

int main(void) {
  phases();
  exit_reports();
  conclusions();
  printf("test_attempt_state: ok\n");
  return 0;
}
