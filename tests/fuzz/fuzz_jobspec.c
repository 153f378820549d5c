/* tests/fuzz/fuzz_jobspec.c: libFuzzer harness for the job spec parser (launcher/jobspec.c).
 *
 * Any bytes must give either a job that keeps the promises of jobspec.h or an error with a
 * message, never a crash, a leak or a hang. Broken promises trap so the fuzzer keeps the input.
 * Not covered here: ln_job_parse_file (the same parser behind a read) and ln_job_from_argv. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "launcher/jobspec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int ok) {
  if (!ok) __builtin_trap();
}

static void check_strv(char **v, size_t count) {
  require(v != NULL);
  for (size_t i = 0; i < count; i++) require(v[i] != NULL);
  require(v[count] == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ln_job *job = NULL;
  ftl_diag d = {{0}};
  ftl_err rc = ln_job_parse_bytes((const char *)data, size, "fuzz.yaml", "/spec", &job, &d);
  if (rc != FTL_OK) {
    require(job == NULL);
    require(d.msg[0] != '\0');
    require(memchr(d.msg, '\0', sizeof d.msg) != NULL);
    return 0;
  }
  require(job != NULL);
  require(job->ranks >= 1 && job->ranks <= 65536);
  require(job->name != NULL && job->name[0] != '\0' && job->name[0] != '.');
  require(job->program != NULL && job->program[0] != '\0');
  check_strv(job->args, job->args_count);
  check_strv(job->env, job->env_count);
  for (size_t i = 0; i < job->env_count; i++) require(strchr(job->env[i], '=') != NULL);
  require(job->rendezvous_timeout_ms >= 1 && job->rendezvous_timeout_ms <= 86400 * 1000);
  require(strlen(job->spec_hash) == 32);
  require(job->launcher == FTL_LAUNCH_AUTO || job->launcher == FTL_LAUNCH_MPIRUN ||
          job->launcher == FTL_LAUNCH_SRUN);
  ln_job_destroy(job);
  return 0;
}
