/* core/launch_env.c: reading the launcher-to-rank contract (core/launch_env.h,
 * docs/formats/launch-env.md). The one reader of these variables: a module that wants one of them
 * takes it from the record. */
#include "core/launch_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftl/core.h"

/* A number the launcher sets: absent is the fallback, malformed an error naming it. */
static ftl_err env_int(const char *name, int64_t min, int64_t max, int64_t fallback, int64_t *out, ftl_diag *d) {
  const char *v = getenv(name);
  if (!v || !*v) {
    *out = fallback;
    return FTL_OK;
  }
  if (ftl_parse_i64(v, min, max, out) != FTL_OK)
    return ftl_diag_fail(d, FTL_ERR_INVAL, "environment variable %s='%s' is not an integer in [%lld, %lld]", name,
                         v, (long long)min, (long long)max);
  return FTL_OK;
}

/* A string the launcher sets, copied whole or refused as too long. */
static ftl_err env_str(const char *name, char *out, size_t size, ftl_diag *d) {
  const char *v = getenv(name);
  out[0] = '\0';
  if (v && ftl_fmt(out, size, "%s", v)) return ftl_diag_fail(d, FTL_ERR_INVAL, "%s is too long", name);
  return FTL_OK;
}

/* A positive number a user may set: malformed is logged and ignored (0: the default). */
static int64_t setting_ms(const char *name) {
  const char *v = getenv(name);
  int64_t x = 0;
  if (v && *v && ftl_parse_i64(v, 1, INT64_MAX / 4, &x) != FTL_OK) {
    FTL_LOG(FTL_LOG_WARN, "ftl", "%s='%.40s' is not a positive number of milliseconds: the default is used", name, v);
    x = 0;
  }
  return x;
}

/* The user's settings, the checkpoint levels and the gang's hosts (their malformed values are never
 * fatal: each only refines what the library does). */
static void read_settings(core_launch_env *env) {
  const char *v = getenv("FTL_BACKEND");
  if (v && (!strcmp(v, "mpi") || !strcmp(v, "nccl"))) snprintf(env->backend, sizeof env->backend, "%s", v);
  env->collective_timeout_ms = setting_ms("FTL_COLLECTIVE_TIMEOUT_MS");
  env->standby_park_timeout_ms = setting_ms("FTL_STANDBY_PARK_TIMEOUT_MS");
  v = getenv("FTL_CKPT_L2_TRANSPORT");
  env->ckpt_l2_mpi = v && !strcmp(v, "mpi");
  if (v && *v && strcmp(v, "tcp") && strcmp(v, "mpi"))
    FTL_LOG(FTL_LOG_WARN, "ckpt", "FTL_CKPT_L2_TRANSPORT=%s is neither tcp nor mpi: tcp is used", v);
  v = getenv("FTL_CKPT_ALLOW_FRESH");
  env->ckpt_allow_fresh = v && !strcmp(v, "1");
  v = getenv("FTL_STANDBY");
  env->standby = v && !strcmp(v, "1");
  v = getenv("FTL_MPI_INIT_BARRIER");
  env->mpi_init_barrier = v && !strcmp(v, "1");
  v = getenv("FTL_CKPT_L2");
  env->ckpt_l2 = !v ? 0 : !strcmp(v, "1") ? 1 : !strcmp(v, "auto") ? 2 : 0;
  v = getenv("FTL_CKPT_L1_MAX_BYTES");
  int64_t mb = 0;
  if (v && ftl_parse_i64(v, 1, INT64_MAX, &mb) == FTL_OK) env->ckpt_l1_max_bytes = (uint64_t)mb;
  v = getenv("FTL_GANG_HOSTS");
  if (v && ftl_fmt(env->gang_hosts, sizeof env->gang_hosts, "%s", v)) {
    FTL_LOG(FTL_LOG_WARN, "cadence", "FTL_GANG_HOSTS is longer than %d bytes: the gang's hosts are not known",
            CORE_GANG_HOSTS_MAX);
    env->gang_hosts[0] = '\0';
  }
  v = getenv("FTL_CKPT_L1_DIR");
  if (v && ftl_fmt(env->ckpt_l1_dir, sizeof env->ckpt_l1_dir, "%s", v)) {
    FTL_LOG(FTL_LOG_WARN, "ckpt", "FTL_CKPT_L1_DIR is too long: L1 is off");
    env->ckpt_l1_dir[0] = '\0';
  }
}

ftl_err core_launch_env_read(core_launch_env *env, ftl_diag *d) {
  memset(env, 0, sizeof *env);
  ftl_err rc;
  int64_t v;
  read_settings(env);
  const char *addr = getenv("FTL_RDZV_ADDR");
  env->present = addr && *addr;
  if (env->present && ftl_fmt(env->addr, sizeof env->addr, "%s", addr))
    return ftl_diag_fail(d, FTL_ERR_INVAL, "FTL_RDZV_ADDR is too long");
  const char *relay = getenv("FTL_RELAY_ADDR");
  if (relay && *relay && (relay[0] != '@' || ftl_fmt(env->relay, sizeof env->relay, "%s", relay)))
    return ftl_diag_fail(d, FTL_ERR_INVAL, "FTL_RELAY_ADDR='%.60s' is not a relay's address (@NAME, shorter than %zu)",
                         relay, sizeof env->relay);
  if ((rc = env_str("FTL_RDZV_TOKEN", env->token, sizeof env->token, d)) ||
      (rc = env_str("FTL_RUN_DIR", env->run_dir, sizeof env->run_dir, d)) ||
      (rc = env_str("FTL_JOB_SPEC_HASH", env->job_spec_hash, sizeof env->job_spec_hash, d)) ||
      (rc = env_str("FTL_FLEET_LEDGER", env->fleet_ledger, sizeof env->fleet_ledger, d)))
    return rc;
  if ((rc = env_int("FTL_RDZV_TIMEOUT_MS", 0, INT64_MAX / 2, 300000, &env->timeout_ms, d))) return rc;
  if ((rc = env_int("RANK", 0, 1 << 24, -1, &v, d))) return rc;
  env->rank = (int)v;
  if ((rc = env_int("WORLD_SIZE", 1, 1 << 24, -1, &v, d))) return rc;
  env->world_size = (int)v;
  if ((rc = env_int("LOCAL_RANK", 0, 1 << 24, -1, &v, d))) return rc;
  env->local_rank = (int)v;
  if ((rc = env_int("LOCAL_WORLD_SIZE", 1, 1 << 24, -1, &v, d))) return rc;
  env->local_world_size = (int)v;
  if ((rc = env_int("FTL_ATTEMPT", 0, 1 << 24, 0, &v, d))) return rc;
  env->attempt = (int)v;
  env->has_attempt = getenv("FTL_ATTEMPT") != NULL;
  return FTL_OK;
}
