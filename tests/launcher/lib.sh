# tests/launcher/lib.sh: shared helpers for the launcher's script tests. Each test runs in a
# fresh scratch folder, with build/bin first on PATH, and fails loudly with what it expected.
# Sourced once: a second source (a test library built on this one) would start another scratch folder.
[ -n "${FTL_TEST_LIB_LOADED:-}" ] && return 0
FTL_TEST_LIB_LOADED=1
set -u
: "${FTL_BIN_DIR:?FTL_BIN_DIR must point at the bin folder of the build}"
export PATH="$FTL_BIN_DIR:$PATH"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/ftl-test.XXXXXX")
cd "$SCRATCH" || exit 1
MARKER="ftl-test-marker-$$-$RANDOM"
# The jobs' L1 folders (checkpoint levels) go under a tmpfs folder of this test's own, removed with
# the scratch folder: ftl keeps a stopped or killed job's L1 copies for a requeue, so the tests would
# otherwise leave them in /dev/shm. `ftl` on PATH is a wrapper that sets ftl run's default L1 root
# (FTL_CKPT_L1_DIR, unless the test sets its own) and execs the real one, so $! and pkill see ftl.
TEST_L1=$(mktemp -d /dev/shm/ftl-test.XXXXXX 2>/dev/null) || TEST_L1=
# Its TMPDIR is the test's own too, where expect_no_leftovers looks for what an ended run left
# (mpirun's session folders).
mkdir -p "$SCRATCH/.bin" "$SCRATCH/tmp"
printf '#!/bin/sh\nFTL_CKPT_L1_DIR=${FTL_CKPT_L1_DIR:-%s} TMPDIR=%s exec "%s/ftl" "$@"\n' "$TEST_L1" "$SCRATCH/tmp" "$FTL_BIN_DIR" >"$SCRATCH/.bin/ftl"
chmod +x "$SCRATCH/.bin/ftl"
export PATH="$SCRATCH/.bin:$PATH"
# remove_scratch: the test's files go, its L1 folder too (every EXIT trap ends with it).
# FTL_TEST_KEEP=1 keeps the scratch folder, for a look at a failure.
remove_scratch() {
  [ -n "$TEST_L1" ] && rm -rf "$TEST_L1"
  if [ -n "${STRANGER:-}" ]; then
    pkill -KILL -u "$STRANGER" 2>/dev/null
    userdel "$STRANGER" 2>/dev/null
    rm -rf "$STRANGER_TOOLS"
  fi
  if [ "${FTL_TEST_KEEP:-0}" = 1 ]; then echo "kept $SCRATCH" >&2; else rm -rf "$SCRATCH"; fi
}
trap 'pkill -KILL -f "$MARKER" 2>/dev/null; remove_scratch' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# stranger_up: a second local account with nothing of the job's (no files, no environment), named
# in $STRANGER, with the forger (tests/fault/forger.py) where it can read it ($STRANGER_TOOLS);
# removed with the scratch folder. Skips the test (77) where it is not root or useradd is refused.
# as_stranger ARGS...: the forger, run by that account.
stranger_up() {
  [ "$(id -u)" = 0 ] || { echo "SKIP: making a second account needs root"; exit 77; }
  local name="ftlx$$"
  useradd -M -r -s /usr/sbin/nologin "$name" 2>/dev/null || { echo "SKIP: useradd is not permitted here"; exit 77; }
  STRANGER=$name
  STRANGER_TOOLS=$(mktemp -d /tmp/ftl-stranger.XXXXXX)
  cp "$FTL_SOURCE_DIR/tests/fault/forger.py" "$STRANGER_TOOLS/"
  chmod 755 "$STRANGER_TOOLS"
  chmod 644 "$STRANGER_TOOLS/forger.py"
}
as_stranger() { (cd / && runuser -u "$STRANGER" -- /usr/bin/python3 "$STRANGER_TOOLS/forger.py" "$@"); }

# yaml_list WORDS...: the words as a YAML flow list of double-quoted strings, ["a", "b"] (a job
# spec's args); a word must not hold a double quote or a backslash.
yaml_list() {
  local sep='' w
  printf '['
  for w in "$@"; do
    printf '%s"%s"' "$sep" "$w"
    sep=', '
  done
  printf ']'
}

# cached KEY DEST BUILD ARGS...: the folder DEST (made if need be) filled with what the command
# BUILD ARGS leaves in an empty folder it runs in, built once per KEY for all the tests of a build:
# the first test that needs it builds it under $FTL_TEST_CACHE (the build's test-cache/,
# tests/CMakeLists.txt) while any other waits for it (flock), and each copies it. For what many tests
# build alike and never change in place: the fine-tune's data and base model, a failure-free
# reference run's adapter. KEY names everything that decides the result, the programs' bytes
# included (bin_key). Without FTL_TEST_CACHE (a test run by hand) BUILD runs in DEST itself.
cached() {
  local key=$1 dest=$2 dir
  shift 2
  mkdir -p "$dest" || return 1
  if [ -z "${FTL_TEST_CACHE:-}" ]; then
    (cd "$dest" && "$@")
    return
  fi
  mkdir -p "$FTL_TEST_CACHE" || return 1
  dir=$FTL_TEST_CACHE/$(printf '%s' "$key" | sha256sum | cut -c1-24)
  (
    flock -w 600 9 || { echo "cached: waited 600 s for $dir.lock" >&2; exit 1; }
    if [ ! -f "$dir/.key" ]; then
      rm -rf "$dir.tmp" "$dir" && mkdir "$dir.tmp" || exit 1
      (cd "$dir.tmp" && "$@") || exit 1
      printf '%s\n' "$key" >"$dir.tmp/.key" && mv "$dir.tmp" "$dir" || exit 1
    fi
  ) 9>"$dir.lock" || return 1
  cp -a "$dir/." "$dest/" && rm -f "$dest/.key"
}

# bin_key NAMES...: the digests of those programs of the build, for a cached KEY.
bin_key() {
  local n
  for n in "$@"; do sha256sum "$FTL_BIN_DIR/$n" | cut -c1-16; done | paste -sd, -
}

# run_ftl OUTFILE ARGS...: runs ftl, saving stdout+stderr to OUTFILE and the exit code to $RC.
run_ftl() {
  local out=$1
  shift
  ftl "$@" >"$out" 2>&1
  RC=$?
}

# wait_rc PID: waits for a job started in the background (PID: its $!), its exit code in $RC.
wait_rc() {
  wait "$1"
  RC=$?
}

# wait_until SECONDS WHAT COMMAND...: polls COMMAND (a function, so its tests are evaluated anew
# each time) every 0.1 s, SECONDS at most; then runs the test's `wait_until_show` (what to print
# when it did not happen), if it defines one, and fails saying WHAT.
wait_until() {
  local s=$1 what=$2
  shift 2
  for _ in $(seq 1 $((s * 10))); do
    "$@" && return 0
    sleep 0.1
  done
  declare -F wait_until_show >/dev/null && wait_until_show
  fail "$what after $s s"
}

expect_rc() {
  [ "$RC" -eq "$1" ] || { cat "${2:-/dev/null}" >&2; fail "expected exit code $1, got $RC"; }
}

expect_contains() {
  grep -qF -- "$2" "$1" || { echo "--- $1:" >&2; cat "$1" >&2; fail "expected '$2' in $1"; }
}

# expect_one_attempt RUNDIR OUTFILE: the run took a single attempt. An unbroken reference run that
# restarted still exits 0, and its first attempt's logs then lack what the test looks for; this says
# so, with ftl's output and why the attempt ended, instead of a puzzling "not found".
expect_one_attempt() {
  [ -d "$1/attempt-0001" ] || return 0
  echo "--- $2:" >&2
  cat "$2" >&2
  echo "--- $1/events.jsonl (failures and attempt ends):" >&2
  grep -E '"event":"(failure|attempt_end|rendezvous_failed|rank_exit|host_[a-z]+)"' "$1/events.jsonl" >&2 || true
  fail "$1 restarted: an unbroken run was expected (why above)"
}

# wait_for_event DIR EVENT [OUTFILE]: until the event log of the run in DIR has EVENT (30 s at
# most); else the test fails, showing OUTFILE (ftl's output) where one is named.
wait_for_event() {
  for _ in $(seq 1 300); do
    grep -q "\"event\":\"$2\"" "$1/events.jsonl" 2>/dev/null && return 0
    sleep 0.1
  done
  [ -n "${3:-}" ] && cat "$3" >&2
  fail "no $2 event in $1/events.jsonl after 30 s"
}

# has_commit RUNDIR: the run has a committed checkpoint now. Not `ls step-*/manifest.json`'s exit
# code: the keep rule may remove an older step between the glob and ls's look at it, and ls then
# fails although a newer commit is there.
has_commit() {
  local m
  for m in "$1"/checkpoints/step-*/manifest.json; do
    [ -e "$m" ] && return 0
  done
  return 1
}

# wait_for_commit RUNDIR OUTFILE: until the run has a committed checkpoint (60 s at most); else the
# test fails, showing OUTFILE (ftl's output).
wait_for_commit() {
  for _ in $(seq 1200); do
    has_commit "$1" && return 0
    sleep 0.05
  done
  cat "$2" >&2
  fail "no committed checkpoint in $1 after 60 s"
}

# No process whose command line carries this test's marker may be left running.
expect_no_leftovers() {
  sleep 0.2
  if pgrep -f "$MARKER" >/dev/null; then
    ps -ef | grep -F "$MARKER" | grep -v grep >&2
    fail "processes of the job are still running"
  fi
  # An ended run leaves no session folder of mpirun's in its TMPDIR (each was about 8 MB).
  local left
  left=$(ls -A "$SCRATCH/tmp" 2>/dev/null | grep -E '^(ftl-mpirun-|ompi\.)')
  [ -z "$left" ] || fail "the run left in its TMPDIR: $left"
}

# current_attempt RUNDIR: the number of the newest attempt folder (the attempt running now; a
# standby's folder does not exist until it is activated), or -1.
current_attempt() {
  local d n=-1
  for d in "$1"/attempt-*; do
    [ -d "$d" ] && n=$((10#${d##*attempt-}))
  done
  echo "$n"
}

# gang_pids RUNDIR PATTERN RANK ATTEMPT [COMM]: the pids of RANK's program in the gang started as
# attempt ATTEMPT of the run in RUNDIR, found by PATTERN in the command line (COMM: the process
# name, to pass over the rank agent). A standby gang for the next attempt carries that attempt's
# number (FTL_ATTEMPT) from its start, so ATTEMPT = current + 1 finds the parked standby.
gang_pids() {
  local rundir=$1 pat=$2 rank=$3 attempt=$4 comm=${5:-} p env
  for p in $(pgrep -f -- "$pat"); do
    [ -n "$comm" ] && [ "$(cat /proc/$p/comm 2>/dev/null)" != "$comm" ] && continue
    env=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null) || continue
    grep -qx "RANK=$rank" <<<"$env" || continue
    grep -qx "FTL_ATTEMPT=$attempt" <<<"$env" || continue
    grep -qx "FTL_RUN_DIR=$(readlink -f "$rundir")" <<<"$env" || continue
    echo "$p"
  done
}

# rank_pid RUNDIR PATTERN RANK [COMM]: the pid of RANK's program in the running attempt (never a
# parked standby's), or nothing.
rank_pid() {
  gang_pids "$1" "$2" "$3" "$(current_attempt "$1")" "${4:-}" | head -1
}

# standby_pid RUNDIR PATTERN RANK [COMM]: the pid of RANK's program in the standby gang parked for
# the next attempt, or nothing.
standby_pid() {
  gang_pids "$1" "$2" "$3" "$(($(current_attempt "$1") + 1))" "${4:-}" | head -1
}

# count_events RUNDIR EVENT: how many EVENT records the run's event log holds.
count_events() {
  local n
  n=$(grep -c "\"event\":\"$2\"" "$1/events.jsonl" 2>/dev/null)
  echo "${n:-0}"
}
