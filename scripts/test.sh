#!/usr/bin/env bash
# Sets up everything on a fresh Debian 12 machine and runs ftl's test suite with ctest, in three
# passes, FTL_TEST_JOBS tests at once (scripts/ctest-lib.sh; what tests share is serialised in
# tests/CMakeLists.txt, "What tests share"):
#   1. normal: a normal build (warnings as errors), every test;
#   2. asan: an ASan+UBSan build, every test but the normal-build-only ones listed below;
#   3. tsan: a TSan build, the tests labelled "tsan" (threaded code: the checkpoint writer, the
#      JSON-lines appends, the rank library's threads, the rank agent's alive reports).
# All three passes run even when one fails; the end prints, per pass, the tests run, passed, failed
# and skipped, then the 10 slowest tests and the total time. Exit code 0 only if every pass passed.
# Long soaks are not here: see scripts/soak.sh; the flake hunt: scripts/flake-hunt.sh
# (docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ctest-lib.sh
start=$(date +%s)
bash scripts/setup-deps.sh
bash scripts/setup-python.sh # .venv: the pinned Hugging Face stack (tests/python/hf_*)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p build

# The tests that run in the normal build only, and why. The ASan+UBSan pass exists to find memory
# errors and undefined behaviour, which hide in code, not in timings: so it runs every unit test,
# codec and fuzz corpus, the checkpoint, pipeline, eval, relay and launcher script tests, and one
# real fault test per mechanism (named after "see"). A test listed here drives code that such a test
# already drives under ASan through a further multi-second scenario, where ASan's 2-5x slowdown
# only costs time; or it measures time. Python tests are not in sanitizer builds at all (an
# interpreter cannot load an instrumented libftl.so: tests/python/CMakeLists.txt), nor the Debian
# packages (deb_lintian).
NORMAL_ONLY=(
  # Labels: long (a minute of a job killed every 2 s; standby_node_loss), timing (a verdict read
  # from the order of events milliseconds apart, which ASan's slowdown blurs: node_loss_spare).
  # Fault scenarios of the example fine-tune whose mechanism a fault_probe test covers in the pass:
  ft_crash_loop           # crash loop: see crash_loop_stops
  ft_hang_restart         # hang detection: see hang_sigstop
  hang_sigstop_default_timeout # the same detector with its default timeout: see hang_sigstop
  ft_preempt_resume       # preemption and resume: see preempt_and_resume
  ft_link_down            # a link down: see link_down_min_ranks
  blackholed_host_excluded # the host probe's timeout path: see unreachable_host_excluded
  ft_restart_cost         # R in the ledgers; the ledger codec is in the pass (test_core_failure_record,
                          # cadence unit tests), the reading in ops_status
  # The standby gang: one take-over in the pass (ft_standby_takeover); these are its other turns.
  ft_standby_parked_killed ft_standby_during_takeover ft_standby_sigterm_parked ft_standby_early_exit
  ft_standby_parked_cost ft_standby_fence
  # Checkpoint levels: a restore from L1 past damaged copies (ft_levels_damaged), from a partner
  # host's L2 over TCP and over MPI (ft_l2_spare, ft_l2_spare_mpi) and an L1-only step
  # (ft_level_steps_kill) are in the pass; these are further turns through the same restore code.
  ft_levels_kill ft_levels_gone ft_levels_hostile ft_levels_full
  ft_level_steps_gone ft_level_steps_corrupt ft_level_steps_l2 ft_level_steps_l2_lost
  ft_l2_corrupt ft_l2_deleted ft_l2_spare_listen_fail ft_l2_spare_connect_fail # (ckpt_l2_tcp: the TCP refusals)
  ft_l2_spare_stranger    # a stranger's L2 connections: the refusals are in ckpt_l2_tcp (unit), the restore in ft_l2_spare
  # Another user against a running job: ft_stranger_relay (the server's and the relay's refusals,
  # both wire paths) is in the pass; these replay the same forgeries without relays and on a standby.
  ft_stranger_direct ft_stranger_standby
  ft_crash_mid_shard ft_crash_mid_manifest # a crash mid-checkpoint: see ckpt_crash_* (the same crash points)
  finetune_kill_autorestart finetune_deterministic # see finetune_kill_resume (two runs, a kill between)
  eval_gate_e2e           # snapshot, train, gate, publish: each is in the pass (eval_snapshot_relaunch,
                          # eval_gate_cases, eval_gate_attacks, pipeline_registry)
  pipeline_registry_concurrent # pipeline_registry's code, 20 rounds of two processes: for races, not memory
  hardening_no_silent_fresh # every step corrupt: the restore's refusals are in hardening_ckpt_edits
  slurm_sbatch_requeue    # Slurm's requeue around ftl's preemption path: see preempt_and_resume, slurm_srun
  # Benchmarks' smoke tests: they check that each benchmark runs and prints its table; the code they
  # time is the library's, which the tests above run under ASan.
  bench_launch_smoke bench_ckpt_smoke bench_train_smoke
)
normal_only=$(printf '%s\n' "${NORMAL_ONLY[@]}" | tr -s ' \t' '\n' | grep -v '^$')

declare -A pass_rc pass_log pass_s
failed_any=0

# run_pass NAME BUILD CTEST-ARGS...: one pass of ctest in BUILD, its output shown and kept in
# build/NAME.ctest.log.
run_pass() {
  local name=$1 dir=$2 t0 rc
  shift 2
  t0=$(date +%s)
  echo
  echo "=== $name pass ($(( t0 - start )) s)"
  set +e
  (cd "$dir" && ctest -j "$FTL_TEST_JOBS" --output-on-failure --no-tests=error "$@") 2>&1 | tee "build/$name.ctest.log"
  rc=${PIPESTATUS[0]}
  set -e
  # A sanitizer pass's failures that are LeakSanitizer's own crash run once more; their second
  # verdicts are appended to the pass's log, and the summary counts each test's last verdict.
  if [ "$rc" != 0 ] && [ "$name" != normal ]; then
    if rerun_lsan_tool_crashes "$dir" >"build/$name.rerun.log" 2>&1; then rc=0; fi
    cat "build/$name.rerun.log" | tee -a "build/$name.ctest.log"
  fi
  pass_rc[$name]=$rc
  pass_log[$name]=build/$name.ctest.log
  pass_s[$name]=$(( $(date +%s) - t0 ))
  [ "$rc" = 0 ] || failed_any=1
}

# rerun_lsan_tool_crashes BUILD: after a failed sanitizer run, the failed tests whose output shows
# LeakSanitizer's own tracer crashing ("Tracer caught signal 11 ... LeakSanitizer has encountered a
# fatal error": its stop-the-world thread died, so no leak check was made at all) are run once
# more. That is the tool failing, not a verdict on our code. Any other failure, or a second one,
# fails the step.
rerun_lsan_tool_crashes() {
  local build=$1 failed log name others=0
  failed=$build/Testing/Temporary/LastTestsFailed.log
  log=$build/Testing/Temporary/LastTest.log
  [ -s "$failed" ] || return 1
  while IFS=: read -r _ name; do
    awk -v t="$name" '$0 ~ "^[0-9]+/[0-9]+ Testing: " t "$" {on=1} on && /^Test (Passed|Failed)|^Test time/ {exit} on' "$log" |
      grep -q "LeakSanitizer has encountered a fatal error" || others=1
  done <"$failed"
  [ "$others" = 0 ] || return 1
  echo "LeakSanitizer's tracer crashed in: $(cut -d: -f2 "$failed" | tr '\n' ' ')- running those again once"
  (cd "$build" && ctest --output-on-failure --rerun-failed)
}

# build NAME CMAKE-ARGS...: build/NAME, its log in build/NAME.build.log (shown when it fails).
build() {
  local name=$1 t0
  shift
  t0=$(date +%s)
  bash scripts/build.sh "build/$name" "$@" >"build/$name.build.log" 2>&1 ||
    { cat "build/$name.build.log" >&2; echo "=== the $name build failed" >&2; exit 1; }
  echo "built build/$name in $(( $(date +%s) - t0 )) s"
}

echo "=== builds ($(( $(date +%s) - start )) s)"
build release -DCMAKE_BUILD_TYPE=RelWithDebInfo
# -O1: what ASan's authors advise for speed; the checks are the same (every access, every UB check).
build asan -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_C_FLAGS_DEBUG=-g -O1" -DFTL_SANITIZE=address,undefined
build tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFTL_SANITIZE=thread
builds_s=$(( $(date +%s) - start ))
# A name above that is no test (a typo, a renamed test) would silently put it back in the ASan pass.
known=$(cd build/release && ctest -N | sed -nE 's/^ +Test +#[0-9]+: //p')
for t in $normal_only; do
  grep -qx "$t" <<<"$known" || { echo "scripts/test.sh: NORMAL_ONLY names '$t', which is no test of build/release" >&2; exit 1; }
done

run_pass normal build/release
echo "Failure detection latencies measured by the fault tests (goals: crash <= 1 s, hang <= timeout + 1 s, node loss <= 10 s):"
grep -h "detection latency" build/release/Testing/Temporary/LastTest.log | sed 's/^[0-9]*: /  /' || true
run_pass asan build/asan -LE 'long|timing' -E "^($(paste -sd'|' <<<"$normal_only"))\$"
run_pass tsan build/tsan -L tsan

echo
echo "=== summary"
rm -f build/summary.txt
printf '%-8s %6s %7s %7s %8s %7s\n' pass tests passed failed skipped seconds
for name in normal asan tsan; do
  ctest_results "${pass_log[$name]}" | awk -F'\t' -v p="$name" -v s="${pass_s[$name]}" '
    { last[$1] = $2 }
    END {
      for (t in last) { n++; c[last[t]]++ }
      printf "%-8s %6d %7d %7d %8d %7d\n", p, n, c["passed"], n - c["passed"] - c["skipped"], c["skipped"], s
    }' | tee -a build/summary.txt
done
echo "the 10 slowest tests (seconds, pass, test):"
# awk reads the whole list: a reader that stops early (head) kills sort with SIGPIPE once the list
# outgrows one write, and pipefail turns that into the run's exit code (141, a green suite failed).
for name in normal asan tsan; do ctest_results "${pass_log[$name]}" | sed "s/^/$name\t/"; done |
  sort -t$'\t' -k4,4 -rn | awk -F'\t' 'NR <= 10 { printf "  %7.1f  %-7s %s\n", $4, $1, $2 }'
total=$(( $(date +%s) - start ))
echo "total: ${total} s (set-up and builds ${builds_s} s, normal ${pass_s[normal]} s, asan ${pass_s[asan]} s, tsan ${pass_s[tsan]} s)"
if [ "$failed_any" != 0 ]; then
  for name in normal asan tsan; do
    [ "${pass_rc[$name]}" = 0 ] || echo "=== the $name pass FAILED (its log: ${pass_log[$name]})"
  done
else
  echo "=== all test passes passed (${total} s)"
fi
# The closing line in the plain form CI's reader takes: every test of every pass, last verdicts.
awk '{ p += $3; f += $4; s += $5 } END { printf "suite: %d passed, %d failed, %d skipped\n", p, f, s }' build/summary.txt
exit "$failed_any"
