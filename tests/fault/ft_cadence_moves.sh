# Issue 6's real run: the example fine-tune with --ckpt-every auto, while a random rank is killed
# at a known rate (one every 2 s: a gang MTBF of about 2 s; kills that land while the gang
# restarts find no rank, so the true MTBF is measured as wall time / kills). The prior failure rate is
# set 30x too low (M about 90 s), so the first derived interval is long; as failures enter the run's
# ledger, the controller's M falls toward the true one and its interval falls toward Daly's optimum
# for it. The cadence events must show the interval moving down, and the last one must be within
# 2x of Daly's interval computed from the true MTBF and the measured stall.
. "$(dirname "$0")/ft_lib.sh" || exit 1
GAP_S=2
cat > job.yaml <<YAML
name: cadence
ranks: 4
program: ftl-finetune
args: [$(printf '"%s", ' "${FT_ARGS[@]}")"--steps", "900", "--throttle-ms", "20", "--ckpt-every", "auto", "--fleet-rate", "10"]
env: {FTL_BACKEND: mpi}
restart: {max_restarts: 60, backoff_s: 0.05, crash_loop: 10}
YAML
sed -i 's/"--steps", "[0-9]*", \("--batch"\)/\1/' job.yaml  # the FT_ARGS step count gives way to 900
ftl run job.yaml >out 2>&1 &
pid=$!
kills=0
t_start=$(date +%s.%N)
for i in $(seq 0 200); do
  rank=$((i % 4))
  sleep "$GAP_S"
  kill -0 $pid 2>/dev/null || break
  p=$(rank_pid runs/cadence "$MARKER" "$rank" ftl-finetune) # the running attempt's, not the standby's
  [ -n "$p" ] && kill -KILL "$p" 2>/dev/null && kills=$((kills + 1))
done
wait_rc $pid
t_end=$(date +%s.%N)
M_TRUE=$(awk -v a="$t_start" -v b="$t_end" -v k="$kills" 'BEGIN { printf "%.2f", (b - a) / (k > 0 ? k : 1) }')
echo "killed $kills ranks in $(awk -v a="$t_start" -v b="$t_end" 'BEGIN { printf "%.1f", b - a }') s: true MTBF $M_TRUE s"
export M_TRUE
expect_rc 0 out
grep '"event":"cadence"' runs/cadence/events.jsonl > cadence.jsonl || fail "no cadence events"
python3 - <<'PY' || fail "the cadence did not move toward the optimum"
import json, math, os
ev = [json.loads(l) for l in open("cadence.jsonl")]
first, last = ev[0], ev[-1]
m_true = float(os.environ["M_TRUE"])
def daly(d, m):
    return math.sqrt(2 * d * m) * (1 + math.sqrt(d / (2 * m)) / 3 + d / (2 * m) / 9) - d if d < 2 * m else m
for e in ev[:: max(1, len(ev) // 8)] + [last]:
    print(f"attempt {e['attempt']} step {e['step']}: every {e['interval_steps']} steps; M = {e['mtbf_h'] * 3600:.1f} s "
          f"from {e['failures']:.0f} failures in {e['rank_hours'] * 3600:.0f} rank-seconds; Daly {e['daly_s'] * 1e3:.2f} ms "
          f"(stall {e['stall_s'] * 1e3:.3f} ms, W {e['durable_s'] * 1e3:.1f} ms, step {e['step_s'] * 1e3:.1f} ms)")
m_first, m_last = first["mtbf_h"] * 3600, last["mtbf_h"] * 3600
target = daly(last["stall_s"], m_true)
print(f"M: prior {m_first:.1f} s -> {m_last:.1f} s (true {m_true:.2f} s); Daly's tau: {first['daly_s'] * 1e3:.2f} -> "
      f"{last['daly_s'] * 1e3:.2f} ms (optimum for the true M and the measured stall: {target * 1e3:.2f} ms)")
assert m_last < m_first / 4, "the failure-rate estimate did not follow the failures"
assert abs(math.log(last["daly_s"] / target)) < abs(math.log(first["daly_s"] / daly(first["stall_s"], m_true))), \
    "Daly's interval did not get closer to the optimum"
assert last["interval_steps"] * last["step_s"] >= last["durable_s"] * 0.999, "the interval is shorter than W"
PY
echo "ok"
