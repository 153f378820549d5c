#!/usr/bin/env bash
# bench/scale/run.sh [--smoke] [BUILD_DIR (build/release)] [N...]: the launcher at scale. For each N
# (default 64 256 1024 4096 16384 32768 65536 131072) a real `ftl run` of N simulated ranks: its
# mpirun is ftl-scale-sim (bench/scale/scale_sim.c), found first on PATH as `mpirun`, which plays
# every rank and agent over loopback with the real wire protocol. Attempt 0: the rendezvous, steady
# state (the launcher's CPU and RSS), a rank killed (detection, tear-down); attempt 1: the restart's
# rendezvous and a clean end. Then the checkpoint table (ftl-scale-ckpt). Prints the tables with
# each figure's ratio to the N = 64 one. --smoke: N = 64 only, a short steady state (the suite's
# smoke test, tests/bench); its numbers mean nothing. A size whose descriptors do not fit the hard
# limit (ulimit -Hn), or whose memory does not fit what the machine has free (MemAvailable), is
# reported as not run with the number it would need, and the sweep goes on.
# FTL_SCALE_KEEP=1 keeps the work folder (the run directories, the launcher's logs) for a look;
# FTL_SCALE_PERF=PATH records the launcher with `perf record -g` over the steady window of the last
# size run into PATH; FTL_SCALE_CKPT=0 leaves the checkpoint's tables out.
# FTL_SCALE_RANKS_PER_HOST=K (default 8): the simulated hosts' size, each behind one relay
# connection (wire version 3, `ftl run` with FTL_RELAY=1); 0: the version 2 shape, two connections
# per rank (`ftl run` with FTL_RELAY=0: the table before the relay). FTL_SCALE_NODE_S (default 600):
# the job's timeouts.node_s.
set -uo pipefail
smoke=0
if [ "${1:-}" = --smoke ]; then
  smoke=1
  shift
fi
build=${1:-$(cd "$(dirname "$0")/../.." && pwd)/build/release}
shift || true
sizes=("$@")
steady_ms=3000
catalog_steps=10000
if [ "$smoke" = 1 ]; then
  sizes=(64)
  steady_ms=500
  catalog_steps=200
fi
[ "${#sizes[@]}" -gt 0 ] || sizes=(64 256 1024 4096 16384 32768 65536 131072)
# Absolute: the fake mpirun below is a symbolic link to it, read from another folder.
build=$(cd "$build" 2>/dev/null && pwd) || { echo "run.sh: no build folder ${1:-}" >&2; exit 2; }
bin=$build/bin
[ -x "$bin/ftl" ] && [ -x "$bin/ftl-scale-sim" ] && [ -x "$bin/ftl-scale-ckpt" ] ||
  { echo "run.sh: no ftl, ftl-scale-sim or ftl-scale-ckpt in $bin" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/ftl-scale-bench.XXXXXX")
[ "${FTL_SCALE_KEEP:-0}" = 1 ] && echo "run.sh: keeping $work" >&2 || trap 'rm -rf "$work"' EXIT
mkdir -p "$work/fake"
ln -s "$bin/ftl-scale-sim" "$work/fake/mpirun"
export FTL_LOG_LEVEL=${FTL_LOG_LEVEL:-error}
hard=$(ulimit -Hn)
per_host=${FTL_SCALE_RANKS_PER_HOST:-8}
# The gang's timeouts.node_s: long by default, so a loaded machine's stalls never read as lost hosts;
# it also bounds the launcher's cadence (a quarter of it: docs/formats/rendezvous-wire.md).
node_s=${FTL_SCALE_NODE_S:-600}
relay=0
[ "$per_host" -gt 0 ] && relay=1

results=$work/results
: >"$results"
for n in "${sizes[@]}"; do
  # The launcher's descriptors: two sockets per rank, or with relays one per host (the standby is
  # off here), and 64 of its own (supervise.c's check). The simulator's workers hold as many again,
  # but each is a process of its own with its own limit (at most 4096 ranks each).
  need=$((2 * n + 64))
  [ "$relay" = 1 ] && need=$(((n + per_host - 1) / per_host + 64))
  if [ "$hard" != unlimited ] && [ "$need" -gt "$hard" ]; then
    echo "n=$n skipped=descriptors need=$need hard=$hard" >>"$results"
    continue
  fi
  # Memory: the launcher's about 1 KiB per rank and the simulator's few, plus the kernel's socket
  # buffers (a few KiB per connection on loopback): 16 KiB per rank is well above all of it.
  mem_need=$((n * 16 + 262144))
  mem_free=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
  if [ -n "$mem_free" ] && [ "$mem_need" -gt "$mem_free" ]; then
    echo "n=$n skipped=memory need_kb=$mem_need free_kb=$mem_free" >>"$results"
    continue
  fi
  job=$work/job-$n.yaml
  out=$work/sim-$n.txt
  cat >"$job" <<YAML
name: scale-$n
ranks: $n
program: /bin/true
args: ["--out", "$out", "--steady-ms", "$steady_ms", "--kill-rank", "$((n / 2))", "--ranks-per-host", "$per_host"]
rendezvous:
  timeout_s: 300
restart:
  standby: "off"
  max_restarts: 1
  backoff_s: 0.001
timeouts:
  node_s: $node_s
YAML
  FTL_RELAY=$relay PATH="$work/fake:$PATH" timeout -k 10 600 "$bin/ftl" run --progress off --run-dir "$work/run-$n" "$job" \
    >"$work/ftl-$n.log" 2>&1
  rc=$?
  if [ "$(grep -c '^attempt=' "$out" 2>/dev/null)" != 2 ]; then
    echo "run.sh: N=$n did not complete (ftl exited $rc); its log:" >&2
    tail -n 30 "$work/ftl-$n.log" >&2
    grep -h . "$work/run-$n"/attempt-*/rank-*.err 2>/dev/null | tail -n 5 >&2
    echo "n=$n skipped=failed rc=$rc" >>"$results"
    continue
  fi
  { tr '\n' ' ' <"$out"; echo; } >>"$results"
done

awk -v smoke="$smoke" -v per_host="$per_host" -v hard="$hard" -v node_s="$node_s" -v cores="$(nproc)" -v load="$(cut -d' ' -f1-3 /proc/loadavg)" '
function kv(line, key,   re, m) {
  if (match(line, "(^| )" key "=[^ ]*")) { m = substr(line, RSTART, RLENGTH); sub(/^ /, "", m); sub(/^[^=]*=/, "", m); return m }
  return ""
}
function ratio(v, base) { return (base + 0 > 0 && v != "") ? sprintf("%.2f", v / base) : "-" }
{
  n = kv($0, "n"); ns[++count] = n
  if ($0 ~ /skipped=/) { skip[n] = $0; next }
  # attempt 0 (the kill) then attempt 1 (the restart) on one line
  split($0, parts, " attempt=1 ")
  a1 = parts[1]; a2 = parts[2]
  rdzv[n] = kv(a1, "rdzv_ms"); detect[n] = kv(a1, "detect_ms"); tear[n] = kv(a1, "teardown_ms")
  cpu[n] = kv(a1, "cpu_pct"); rss[n] = kv(a1, "rss_kb"); rdzv2[n] = kv(a2, "rdzv_ms"); rcpu[n] = kv(a1, "rdzv_cpu_ms")
  gap[n] = (kv(a2, "start_wall_us") - kv(a1, "kill_wall_us")) / 1000.0
}
END {
  if (per_host > 0) printf "launcher at scale: one real ftl launcher, N simulated ranks + agents over loopback (relays: %d ranks per host, 1 socket per host)\n", per_host
  else printf "launcher at scale: one real ftl launcher, N simulated ranks + agents over loopback (2 sockets per rank)\n"
  printf "machine: %s cores shared with other work (load average %s); descriptor hard limit %s; timeouts.node_s %s%s\n", cores, load, hard, node_s, smoke ? "; --smoke: the numbers mean nothing" : ""
  printf "rdzv: last hello sent to the last go read (wall); rdzv cpu: the launcher'"'"'s CPU ms meanwhile (/proc/PID/schedstat);\n"
  printf "detect: the killed rank'"'"'s exit report to the first agent signalled; teardown: to the last; restart: the kill to\n"
  printf "the next gang'"'"'s start; rdzv2: the restart'"'"'s rendezvous; cpu: the launcher in steady state, %% of one core\n"
  printf "%7s %10s %10s %10s %10s %10s %10s %9s %9s %10s\n", "N", "rdzv ms", "rdzv cpu", "detect ms", "teardown", "restart", "rdzv2 ms", "cpu %", "rss KiB", "KiB/rank"
  b = ns[1]
  for (i = 1; i <= count; i++) {
    n = ns[i]
    if (n in skip) {
      if (skip[n] ~ /descriptors/) printf "%7s not run: needs %s descriptors, the hard limit (ulimit -Hn, RLIMIT_NOFILE) is %s\n", n, kv(skip[n], "need"), kv(skip[n], "hard")
      else if (skip[n] ~ /memory/) printf "%7s not run: needs about %d MiB of memory, %d MiB available (MemAvailable)\n", n, kv(skip[n], "need_kb") / 1024, kv(skip[n], "free_kb") / 1024
      else printf "%7s not run: the run failed (%s)\n", n, skip[n]
      continue
    }
    per = (n != b && rss[b] != "") ? sprintf("%.2f", (rss[n] - rss[b]) / (n - b)) : "-"
    printf "%7s %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %9.2f %9d %10s\n", n, rdzv[n], rcpu[n], detect[n], tear[n], gap[n], rdzv2[n], cpu[n], rss[n], per
  }
  printf "ratio to N=%s (N ratio, N log N ratio)\n", b
  for (i = 1; i <= count; i++) {
    n = ns[i]
    if (n in skip || !(b in rdzv)) continue
    nr = n / b; nl = (n * log(n)) / (b * log(b))
    printf "%7s %10s %10s %10s %10s %10s %10s %9s %9s   N x%.0f, N log N x%.1f\n", n, ratio(rdzv[n], rdzv[b]), ratio(rcpu[n], rcpu[b]), ratio(detect[n], detect[b]), ratio(tear[n], tear[b]), ratio(gap[n], gap[b]), ratio(rdzv2[n], rdzv2[b]), ratio(cpu[n], cpu[b]), ratio(rss[n], rss[b]), nr, nl
  }
  printf "goals at N=131072: rdzv <= 1000 ms, detect <= 50 ms, cpu <= 5%% (<= 2%% at N=16384), <= 2 KiB per rank; each figure growing no faster than N log N\n"
}' "$results"

[ "${FTL_SCALE_CKPT:-1}" = 0 ] && exit 0
# The checkpoint's metadata at the same sizes (the manifest commit, restore planning), and the
# catalog over a synthetic run directory of $catalog_steps committed steps, with the real `ftl ckpt ls`.
echo
"$bin/ftl-scale-ckpt" commit "$work/ckpt" "${sizes[@]}" || exit 2
"$bin/ftl-scale-ckpt" catalog "$work/catalog" "$catalog_steps" || exit 2
t0=$(date +%s%N)
"$bin/ftl" ckpt ls "$work/catalog" >"$work/ls.txt" || { echo "run.sh: ftl ckpt ls failed" >&2; exit 2; }
t1=$(date +%s%N)
lines=$(($(wc -l <"$work/ls.txt") - 1))
awk -v ms="$(((t1 - t0) / 1000))" -v n="$lines" 'BEGIN { printf "  %-44s %10.2f ms (%.2f us per step, %d steps listed)\n", "ftl ckpt ls (the command, a process)", ms / 1000.0, ms / (n ? n : 1), n }'
