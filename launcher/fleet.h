/* launcher/fleet.h: the fleet ledger from the launcher's side (docs/formats/fleet-ledger.md,
 * "Per-host history"): what an attempt saw of each host, written after it, and what the fleet's
 * history says of each host, read before the job starts.
 *
 *   - During an attempt, the supervisor notes each rank's host (its agent's hello) and each change of
 *     a GPU's verdict (the gpu_health messages): into bounded tables, no I/O on the event loop.
 *   - After it, run.c appends the changes as gpu_health records, the failure's GPU and the host's
 *     addresses on its failure record, and the exposure split by host (ln_fleet_*_record).
 *   - Before the first attempt, the job's hostfile plan is judged against the fleet's per-host
 *     history (ftl_cadence_fleet_hosts_load over the job's fleet.history_days): bad hosts are left
 *     out while the rest still hold the job's ranks, degraded ones moved to the end of the plan so
 *     spares take their place first (ln_fleet_decide, pure; ln_fleet_plan_start carries it out).
 *   - Every attempt's ranks get the gang's hosts as FTL_GANG_HOSTS (the cadence's per-host rates).
 *
 * Not thread-safe: the launcher's one thread. Every function accepts a NULL ln_fleet (then it does
 * nothing), so a job without a fleet ledger costs nothing. */
#ifndef FTL_LAUNCHER_FLEET_H
#define FTL_LAUNCHER_FLEET_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ftl/cadence.h"
#include "launcher/events.h"
#include "launcher/jobspec.h"
#include "launcher/policy.h"

typedef struct ln_fleet ln_fleet;

/* The job's side of the fleet ledger: its history read (when the job has a fleet_ledger and
 * fleet.history_days > 0; a ledger that cannot be read is warned about and treated as no history),
 * and the tables an attempt fills. NULL when the job has no fleet ledger, or out of memory (warned:
 * the job runs without). */
ln_fleet *ln_fleet_open(const ln_job *job);
void ln_fleet_close(ln_fleet *f);

/* ---- before the first attempt ------------------------------------------------------------------ */

typedef enum ln_fleet_action {
  LN_FLEET_KEEP = 0,     /* nothing against it (or no history) */
  LN_FLEET_LEFT_OUT = 1, /* bad: left out of the plan (marked bad) */
  LN_FLEET_KEPT_BAD = 2, /* bad, but the other hosts do not hold the job's ranks: kept, warned */
  LN_FLEET_MOVED = 3,    /* degraded: moved to the end of the plan, behind the spares */
} ln_fleet_action;

/* The start-of-job decision, pure. hosts[0..n) is the hostfile plan (hosts already bad are left as
 * they are), ranks the job's ranks, hist the fleet's per-host history (may be NULL). Each host
 * matches a summary by name or by one of its addresses (ln_policy_host_matches). Bad hosts, worst
 * first, are left out one by one while the hosts left still hold `ranks` slots; degraded ones are
 * moved behind every other host (their order kept). Fills action[i] and match[i] (the summary or
 * NULL) per host, and order[0..n), the plan's new order (indexes into hosts). Returns how many
 * hosts were left out or moved. */
int ln_fleet_decide(const ln_policy_host *hosts, size_t n, int ranks, const ftl_cadence_fleet_hosts *hist,
                    ln_fleet_action *action, const ftl_cadence_fleet_host **match, size_t *order);

/* Carries the decision out on the plan (reordered in place; bad hosts marked bad), says each host
 * left out, kept or moved on stderr ("ftl: host n17 left out: GPU GPU-abcd failed (row remapping
 * failed) 2 h ago in job lora-7b"), and writes one `fleet_hosts` event (docs/formats/events.md) when
 * anything was decided. */
void ln_fleet_plan_start(ln_fleet *f, const ln_job *job, ln_policy_host *hosts, size_t n, ln_events *events,
                         int attempt);

/* "GPU GPU-abcd failed (row remapping failed) 2 h ago in job lora-7b": a summary's reason with
 * when and where, for messages. */
void ln_fleet_describe(const ftl_cadence_fleet_host *h, int64_t now_us, char *buf, size_t size);
/* "40 s ago", "12 min ago", "2 h ago", "9 days ago"; "-" for at_us ≤ 0. */
void ln_fleet_ago(char *buf, size_t size, int64_t now_us, int64_t at_us);

/* ---- each attempt ------------------------------------------------------------------------------ */

/* Starts an attempt's tables, and returns its FTL_GANG_HOSTS value ("host:ranks,..."; "" when it
 * does not fit; valid until the next call): the plan's hosts not left out filled slot by slot in
 * order up to world ranks, as mpirun maps them, each named as the fleet's history names it when a
 * summary matches it by address; without a hostfile plan (n 0), this host with every rank; ""
 * when srun places the ranks (on its allocation's hosts). NULL for a NULL f. */
const char *ln_fleet_attempt_begin(ln_fleet *f, const ln_policy_host *hosts, size_t n, int world);

/* The supervisor's notes (launcher/supervise.c): a rank's agent said hello from host (addrs: its
 * IPv4 addresses); a host's GPUs were judged (gpus: the gpu_health message's array), at wall_us. */
void ln_fleet_note_rank(ln_fleet *f, int rank, const char *host, const char *addrs);
void ln_fleet_note_gpus(ln_fleet *f, const char *host, const char *addrs, const json_t *gpus, int64_t wall_us);

/* After the attempt: its GPU verdict changes as gpu_health records (before the failure record, so a
 * reader meets the GPU's reason first). */
void ln_fleet_gpu_records(ln_fleet *f, const ln_job *job, int attempt, int world);
/* A failure record's GPU (the one that failed on rec->host, when cause is gpu_failed) and its host's
 * addresses, as this attempt saw them. */
void ln_fleet_fill_failure(const ln_fleet *f, ftl_cadence_record *rec);
/* Appends the attempt's exposure rec (rank_hours set) split by host, to the fleet ledger and to
 * run_ledger (the run's failures.jsonl; NULL: not there): the ranks each host ran (from the agents'
 * hellos, else the plan) × the attempt's wall time, in records of at most
 * FTL_CADENCE_MAX_RECORD_HOSTS hosts whose exposures add up to rec's, the same in both ledgers. */
void ln_fleet_exposure_record(ln_fleet *f, const char *run_ledger, const ftl_cadence_record *rec);

/* ---- `ftl fleet` (fleet_cmd.c) ------------------------------------------------------------------ */

extern const char ln_fleet_help[];
int ln_cmd_fleet(int argc, char **argv);

#endif
