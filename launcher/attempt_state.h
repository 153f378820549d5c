/* launcher/attempt_state.h: an attempt's state machine and the rules that name its root cause and
 * its outcome, as pure functions of what the launcher has seen (no I/O, no clock): the phases and
 * their transitions, how one rank's exit report is judged, and how the attempt ended once mpirun
 * is gone. supervise.c feeds them from its poll loop and acts on what they say
 * (tests/launcher/test_attempt_state.c). */
#ifndef FTL_LAUNCHER_ATTEMPT_STATE_H
#define FTL_LAUNCHER_ATTEMPT_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "launcher/launcher.h"

/* The phases of an attempt. Launching, rendezvous and running follow what the ranks report and may
 * alternate (a program's ranks can reach the rendezvous after every agent is up); from stopping on
 * the attempt only moves forward. */
typedef enum ln_attempt_phase {
  LN_PHASE_LAUNCHING = 0, /* mpirun/srun is placing the gang: not every agent has said hello */
  LN_PHASE_RENDEZVOUS,    /* a rank joined the rendezvous and the gang has not gone yet */
  LN_PHASE_RUNNING,       /* every agent is up and no rendezvous is pending */
  LN_PHASE_STOPPING,      /* a preemption: the ranks were asked to checkpoint and stop */
  LN_PHASE_ENDING,        /* ftl is ending the gang: SIGTERM sent, SIGKILL after the grace */
  LN_PHASE_DRAINING,      /* mpirun is gone; the agents' last reports are read */
  LN_PHASE_ENDED,
} ln_attempt_phase;

/* The phase now and every phase entered (1u << phase), or asked for while ending: a stop. */
typedef struct ln_phases {
  ln_attempt_phase phase;
  unsigned seen;
} ln_phases;

#define LN_PHASES_INIT {.phase = LN_PHASE_LAUNCHING, .seen = 1u << LN_PHASE_LAUNCHING}

const char *ln_phase_name(ln_attempt_phase p);

/* Whether phase p was ever entered or asked for. */
int ln_phase_was(const ln_phases *s, ln_attempt_phase p);

/* Moves to phase p. Once stopping or ending, the attempt never goes back to launching, rendezvous
 * or running, nor from ending to stopping: such a request is only remembered (in seen). Returns 1
 * when the phase changed (the caller logs it), 0 otherwise. */
int ln_phase_enter(ln_phases *s, ln_attempt_phase p);

/* The life phase the ranks' reports call for (rendezvous while some rank has joined and the gang
 * has not gone; running once every agent is up), or the phase now when neither holds or the attempt
 * is already stopping or further. */
ln_attempt_phase ln_life_phase(ln_attempt_phase now, int joined, int went, int agents_up, int world);

/* "SIGTERM", "SIGKILL", ...; "signal" for one without a name here. */
const char *ln_signal_name(int sig);

/* The outcome's name in events.jsonl ("succeeded", "rendezvous_failed", ...). */
const char *ln_outcome_name(ln_attempt_outcome o);

/* One rank's exit report, and what the attempt knew when it came. */
typedef struct ln_exit_report {
  int exit_code, signal;
  int exec_error;    /* the agent could not start the program */
  int ending;        /* ftl has been ending the gang (the ending phase was entered) */
  int stopping;      /* a preemption was under way (the stopping phase was entered) */
  int early_stop;    /* a stop came before the gang formed */
  int agent_lost;    /* some agent's connection dropped without an exit report */
  int have_root;     /* the root cause is already known */
} ln_exit_report;

typedef enum ln_exit_verdict {
  LN_EXIT_CLEAN = 0,   /* exit code 0, no signal */
  LN_EXIT_CONSEQUENCE, /* a failure that follows from ftl's own ending or stop: not a cause */
  LN_EXIT_HELD,        /* an outside SIGTERM, or a failure while an agent has vanished: held
                          LOST_AGENT_SETTLE_MS, as a lost host may be the cause */
  LN_EXIT_ROOT,        /* a failure of its own: the root cause (unless one is known already) */
} ln_exit_verdict;

ln_exit_verdict ln_judge_exit(const ln_exit_report *r);

/* A held SIGTERM death (LN_EXIT_HELD) that settled: 1 when it was part of a stop ftl was asked for
 * meanwhile (a scheduler signals the ranks and ftl at once), so it is no failure at all. */
int ln_held_death_was_stop(int stopping, int early_stop, int interrupt_signal);

/* How the root-cause rank ended, for its summary: how_override when given, else "was killed by
 * signal 9 (SIGKILL)" or "exited with code 3". */
void ln_root_how(char *buf, size_t size, const char *how_override, int code, int sig);

/* What the attempt knew when mpirun had gone and the last reports were read. */
typedef struct ln_conclusion_in {
  ln_attempt_outcome outcome; /* as set so far (a failed rendezvous or launch stays) */
  int mpirun_code;             /* mpirun's exit code, 128 + signal when killed */
  int world;
  int all_zero;                /* every rank reported an exit 0 */
  int first_missing;           /* the first rank without an exit report, or -1 */
  const char *first_missing_host; /* its host as the rendezvous heard it, or NULL */
  int early_stop, stopping, have_root;
  int interrupt_signal;
  int64_t last_step, committed_step;
} ln_conclusion_in;

typedef enum ln_conclusion_kind {
  LN_CONCLUDE_KEEP = 0, /* the outcome and summary already set stand */
  LN_CONCLUDE_SET,      /* outcome and summary as given */
  LN_CONCLUDE_LAUNCHER, /* a root cause of kind launcher: summary is the reason, with mpirun_code */
} ln_conclusion_kind;

typedef struct ln_conclusion {
  ln_conclusion_kind kind;
  ln_attempt_outcome outcome;
  char summary[300];    /* the launcher reason is cut here, as it always was */
} ln_conclusion;

void ln_conclude(const ln_conclusion_in *in, ln_conclusion *out);

#endif
