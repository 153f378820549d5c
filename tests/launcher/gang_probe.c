/* tests/launcher/gang_probe.c: a rank program whose misbehaviour the launcher tests choose.
 *   --no-init-rank R     rank R never calls ftl_init (it sleeps), as a hung or slow rank would
 *   --exit-rank R        rank R exits with --code C after joining the gang (others wait)
 *   --kill-rank R        rank R kills itself with SIGKILL after joining
 *   --check-env          every rank checks RANK/WORLD_SIZE/LOCAL_RANK/... against ftl_init's view
 *   --sleep-ms MS        every rank sleeps this long before finishing
 *   --until-file F       ... or less: until F exists (looked at every 50 ms), so that a test runs
 *                        the same command again without the wait
 * RANK comes from the environment ftl run sets, so a rank that skips ftl_init still knows it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ftl/ftl.h"
#include "probe.h"

static int env_int(const char *name) {
  int64_t v = -1;
  const char *s = getenv(name);
  if (!s || ftl_parse_i64(s, 0, 1 << 24, &v) != FTL_OK) return -1;
  return (int)v;
}

int main(int argc, char **argv) {
  int64_t no_init = -1, exit_rank = -1, code = 3, kill_rank = -1, sleep_ms = 0;
  int check_env = 0;
  const char *until_file = probe_take_path(&argc, argv, "until-file");
  const probe_opt opts[] = {PROBE_NUM("no-init-rank", no_init, 0, 1 << 20), PROBE_NUM("exit-rank", exit_rank, 0, 1 << 20),
                            PROBE_NUM("code", code, 0, 255),          PROBE_NUM("kill-rank", kill_rank, 0, 1 << 20),
                            PROBE_FLAG("check-env", check_env),       PROBE_NUM("sleep-ms", sleep_ms, 0, 3600000)};
  if (probe_parse_opts(argc, argv, opts, (int)(sizeof opts / sizeof *opts))) return 2;
  int env_rank = env_int("RANK");
  if (env_rank == no_init) {
    sleep(600);
    return 0;
  }
  ftl_ctx *ctx = probe_join("gang_probe", &argc, &argv);
  if (!ctx) return 10;
  const ftl_info *info = ftl_ctx_info(ctx);
  int bad = 0;
  if (check_env) {
    const char *master_addr = getenv("MASTER_ADDR");
    bad |= env_rank != info->rank;
    bad |= env_int("WORLD_SIZE") != info->world_size;
    bad |= env_int("LOCAL_RANK") != info->local_rank;
    bad |= env_int("LOCAL_WORLD_SIZE") != info->local_world_size;
    bad |= !master_addr || !*master_addr || env_int("MASTER_PORT") <= 0;
    bad |= !info->under_launcher || !info->run_dir;
    printf("env rank=%d world=%d local=%d/%d master=%s:%d under_launcher=%d -> %s\n", env_rank, env_int("WORLD_SIZE"),
           env_int("LOCAL_RANK"), env_int("LOCAL_WORLD_SIZE"), master_addr ? master_addr : "(none)",
           env_int("MASTER_PORT"), info->under_launcher, bad ? "MISMATCH" : "ok");
  }
  ftl_step_done(ctx, 1);
  if (info->rank == exit_rank) {
    fflush(stdout);
    _exit((int)code);
  }
  if (info->rank == kill_rank) raise(SIGKILL);
  struct stat st;
  for (int64_t slept = 0; slept < sleep_ms && !(until_file && stat(until_file, &st) == 0); slept += 50)
    usleep((useconds_t)(sleep_ms - slept < 50 ? sleep_ms - slept : 50) * 1000);
  /* Waits for everyone: with a rank gone, the launcher must end this wait, not the deadline. */
  ftl_err rc = ftl_barrier(ctx, 120000);
  ftl_finalize(ctx);
  return bad ? 20 : rc ? 11 : 0;
}
