/* tests/core/ledger_tool.c: a fleet ledger's writer and reader as a command, for the ledger fault
 * test (ledger_faults.sh): real processes append with FTL_FAULT and FTL_CRASH_AT set, another
 * reads what they left.
 *   ledger_tool append PATH ATTEMPT   one exposure record (job "faults", 1 rank-hour) through
 *                                     ftl_cadence_fleet_append; FTL_FAULT (core/fs.h) applied first
 *   ledger_tool load PATH             prints "lines N skipped M rank_hours H" (ftl_cadence_load_ledger)
 * Exit 0 on success, 1 with the message on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "ftl/cadence.h"
#include "ftl/core.h"

static int append(const char *path, const char *attempt) {
  ftl_cadence_record rec;
  ftl_diag d = {{0}};
  memset(&rec, 0, sizeof rec);
  rec.kind = FTL_CADENCE_REC_EXPOSURE;
  snprintf(rec.job, sizeof rec.job, "faults");
  snprintf(rec.host, sizeof rec.host, "host0");
  rec.attempt = strtoll(attempt, NULL, 10);
  rec.world_size = 1;
  rec.step = -1;
  rec.rank_hours = 1.0;
  core_fault_from_env();
  if (ftl_cadence_fleet_append(path, &rec, 10000, &d)) {
    fprintf(stderr, "ledger_tool: %s\n", d.msg);
    return 1;
  }
  return 0;
}

static int load(const char *path) {
  ftl_cadence_config cfg;
  ftl_cadence *c = NULL;
  ftl_cadence_load_stats st;
  ftl_diag d = {{0}};
  ftl_cadence_config_init(&cfg);
  if (ftl_cadence_create(&cfg, &c, &d) || ftl_cadence_load_ledger(c, path, &st, &d)) {
    fprintf(stderr, "ledger_tool: %s\n", d.msg);
    ftl_cadence_destroy(c);
    return 1;
  }
  printf("lines %lld skipped %lld rank_hours %g\n", (long long)st.lines, (long long)st.skipped, st.rank_hours);
  ftl_cadence_destroy(c);
  return 0;
}

int main(int argc, char **argv) {
  ftl_log_init_from_env();
  if (argc == 4 && !strcmp(argv[1], "append")) return append(argv[2], argv[3]);
  if (argc == 3 && !strcmp(argv[1], "load")) return load(argv[2]);
  fprintf(stderr, "usage: ledger_tool append PATH ATTEMPT | load PATH\n");
  return 2;
}
