# tests/fault/straggler_gpu_health.sh: GPU health where the operator looks (issue 35), through the
# fake NVML (docs/formats/nvml-fake.md; no GPU here), on one host with two ranks and two fake GPUs:
#  1. rank 1 computes 3x longer per step and its GPU (local rank 1: GPU 1) thermal-throttles from
#     the first check: the straggler's log line and event say how much slower and the GPU's verdict
#     ("is 3.0× slower ...; its GPU 1 (GPU-bbbb) is degraded: thermal throttling"); `ftl status` and
#     `--json` list the straggler with it; the metrics textfile has a health gauge per GPU and the
#     count not healthy (metrics_check.py, promtool where installed); `ftl report` has the GPU
#     health section (the GPUs, the change of verdict, the straggler with its GPU) and headless
#     Chromium renders it (the screenshot is not blank);
#  2. the other way round: rank 1's GPU turns degraded late (its 80th check, 100 ms apart), then
#     GPU 0 too; the verdict is said beside the straggler exactly once: by a straggler_gpu event when
#     the straggler was found first (the usual order), else in the straggler event itself (a very
#     slow machine), never both, and GPU 0's change (not a straggler's) says nothing of the kind.
# Each job runs until the test has seen what it waits for (the probe's --until-file), so nothing
# rests on a fixed sleep. Chromium missing: everything else is checked, then 77 (skipped).
. "$FTL_SOURCE_DIR/tests/launcher/lib.sh" || exit 1
export FTL_GPU_HEALTH_MS=100
PROBE=(fault_probe --steps 2000 --step-ms 40 --slow-rank 1 --slow-ms 80 --save-every 0)

# wait_grep FILE PATTERN RUNPID: until FILE has a line matching PATTERN (60 s at most), or the run
# ended without it.
wait_grep() {
  for _ in $(seq 1 600); do
    grep -q -- "$2" "$1" 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || break
    sleep 0.1
  done
  grep -q -- "$2" "$1" 2>/dev/null || fail "no line matching '$2' in $1"
}

cat >early.json <<'JSON'
{"version": 1, "devices": [
  {"readings": [{"uuid": "GPU-aaaa", "name": "NVIDIA H100 80GB HBM3", "temperature_c": 55}]},
  {"readings": [{"uuid": "GPU-bbbb", "name": "NVIDIA H100 80GB HBM3", "temperature_c": 93, "throttle": ["hw_thermal"]}]}
]}
JSON
FTL_NVML_FAKE=$PWD/early.json ftl run -n 2 --max-restarts 0 --run-dir run --metrics-textfile "$PWD/m.prom" -- \
  "${PROBE[@]}" --until-file "$SCRATCH/seen" --marker "$MARKER" >out 2>&1 &
pid=$!
wait_grep run/events.jsonl '"event":"straggler"' $pid
# While it runs: status (text and JSON) and the metrics textfile.
run_ftl status.out status run
run_ftl status.json status run --json
touch "$SCRATCH/seen"
wait_rc $pid
expect_rc 0 out
expect_contains out "straggler: rank 1 on host $(hostname -s) is "
expect_contains out "× slower than the others ("
expect_contains out "median compute per step over the last 10 reports); its GPU 1 (GPU-bbbb) is degraded: thermal throttling; with one host there is nothing to exclude"
ev=$(grep '"event":"straggler"' run/events.jsonl)
[ "$(echo "$ev" | wc -l)" -eq 1 ] || fail "only rank 1 is a straggler: $ev"
/usr/bin/python3 - "$ev" <<'PY' || fail "the straggler event: $ev"
import json, sys
e = json.loads(sys.argv[1])
assert e["rank"] == 1 and e["local_rank"] == 1, e
assert 2.0 < e["ratio"] < 4.5 and abs(e["ratio"] - e["compute_ms"] / e["others_median_ms"]) < 1e-6, e
g = e["gpu"]
assert (g["index"], g["uuid"], g["verdict"], g["reason"]) == (1, "GPU-bbbb", "degraded", "thermal throttling"), g
PY
! grep -q '"event":"straggler_gpu"' run/events.jsonl || fail "the verdict was said twice (a straggler_gpu event after a straggler event that said it)"
expect_contains status.out "gpu health: 1 of 2 GPUs not healthy"
expect_contains status.out "stragglers: 1"
expect_contains status.out "attempt 0: rank 1 on host $(hostname -s) is "
expect_contains status.out "; its GPU 1 (GPU-bbbb) is degraded: thermal throttling"
/usr/bin/python3 - status.json <<'PY' || { cat status.json >&2; fail "ftl status --json: stragglers"; }
import json, sys
d = json.load(open(sys.argv[1]))
s, = d["stragglers"]
assert (s["attempt"], s["rank"], s["local_rank"], s["host_suspect"]) == (0, 1, 1, False), s
assert s["ratio"] > 2.0, s
assert s["gpu"] == {"index": 1, "uuid": "GPU-bbbb", "verdict": "degraded", "reason": "thermal throttling"}, s
PY
# The metrics textfile as ftl run left it (ftl_up 0): a gauge per GPU, the count not healthy.
/usr/bin/python3 "$FTL_SOURCE_DIR/tests/launcher/metrics_check.py" m.prom ftl_up=0 'ftl_gpu_health{gpu=0}=0' \
  'ftl_gpu_health{gpu=1}=1' ftl_gpus_not_healthy=1 ftl_job=fault_probe || { cat m.prom >&2; fail "metrics textfile"; }
expect_contains m.prom "ftl_gpu_health{ftl_job=\"fault_probe\",host=\"$(hostname -s)\",gpu=\"1\",uuid=\"GPU-bbbb\"} 1"
if command -v promtool >/dev/null; then
  promtool check metrics <m.prom >promtool.out 2>&1 && [ ! -s promtool.out ] || { cat promtool.out; fail "promtool rejects m.prom"; }
fi

# The report: the GPU health section, self-contained and well-formed, rendered by Chromium.
run_ftl report.out report run -o report.html
expect_rc 0 report.out
for what in "<h2>GPU health</h2>" "2 GPUs, 1 not healthy" "Changes of verdict" "<h3>Stragglers</h3>" "GPU-bbbb" \
  "thermal throttling" "1 (GPU-bbbb)</td><td class=\"warn\">degraded</td>" "a GPU degraded"; do
  expect_contains report.html "$what"
done
grep -o -i -E '<script|<link|<img|<iframe|src=|href=|url\(|@import' report.html && fail "the report refers to outside resources"
/usr/bin/python3 - report.html <<'PY' || fail "report.html is not well-formed"
import sys, xml.dom.minidom, re
html = open(sys.argv[1]).read()
blocks = re.findall(r"<svg.*?</svg>", html, re.S)
assert len(blocks) >= 2, len(blocks)
for b in blocks:
    xml.dom.minidom.parseString(b)
# The GPU section's tables are well-formed too (each table an XML fragment).
sec = html[html.index("<h2>GPU health</h2>"):html.index("<h2>Goodput</h2>")]
for t in re.findall(r"<table>.*?</table>", sec, re.S):
    xml.dom.minidom.parseString(t.replace("&#215;", "x"))
# The timeline marks the GPU that turned degraded: a triangle whose title names it.
assert re.search(r'<path d="M [^"]*" fill="#f4b400"[^>]*><title>GPU 1 \(GPU-bbbb\) on host [^:]+: degraded: thermal throttling</title>', html), "no GPU mark"
PY

# 2. The GPU turns degraded after the straggler was reported (the usual order).
/usr/bin/python3 - <<'PY'
import json
late = lambda uuid, at, reason: {"readings": [{"uuid": uuid, "name": "NVIDIA H100 80GB HBM3"}] + [{}] * (at - 1)
                                 + [{"throttle": [reason]}]}
json.dump({"version": 1, "devices": [late("GPU-aaaa", 90, "hw_power_brake"), late("GPU-bbbb", 80, "hw_thermal")]},
          open("late.json", "w"))
PY
FTL_NVML_FAKE=$PWD/late.json ftl run -n 2 --max-restarts 0 --run-dir late -- \
  "${PROBE[@]}" --until-file "$SCRATCH/seen2" --marker "$MARKER" >late.out 2>&1 &
pid=$!
wait_grep late/events.jsonl '"event":"straggler"' $pid
wait_grep late/events.jsonl '"verdict":"degraded","reason":"HW power brake"' $pid
touch "$SCRATCH/seen2"
wait_rc $pid
expect_rc 0 late.out
/usr/bin/python3 - late/events.jsonl <<'PY' || { grep -E 'straggler|gpu_health' late/events.jsonl >&2; fail "the late verdict beside the straggler"; }
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
st = [e for e in evs if e["event"] == "straggler"]
sg = [e for e in evs if e["event"] == "straggler_gpu"]
assert len(st) == 1 and st[0]["rank"] == 1, st
said_first = st[0].get("gpu", {}).get("verdict") == "degraded"
# Exactly once: in the straggler event (the GPU was degraded before it was found) or after it.
assert len(sg) == (0 if said_first else 1), (st, sg)
for e in sg:
    assert (e["rank"], e["gpu"]["index"], e["gpu"]["uuid"]) == (1, 1, "GPU-bbbb"), e
    assert e["gpu"]["verdict"] == "degraded" and e["gpu"]["reason"] == "thermal throttling", e
    assert e["ratio"] == st[0]["ratio"], e
print("said", "in the straggler event (a slow machine)" if said_first else "by a straggler_gpu event after it")
PY
if grep -q '"event":"straggler_gpu"' late/events.jsonl; then
  expect_contains late.out "reported before) now: its GPU 1 (GPU-bbbb) is degraded: thermal throttling"
fi
run_ftl late.status status late
expect_contains late.status "; its GPU 1 (GPU-bbbb) is degraded: thermal throttling"
expect_no_leftovers

CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || { echo "skipped (the rest passed): chromium is not installed to render the report"; exit 77; }
mkdir profile
timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking \
  --disable-component-update --no-first-run --user-data-dir="$PWD/profile" --screenshot="$PWD/shot.png" \
  --window-size=1200,1600 "file://$PWD/report.html" >chromium.out 2>&1
[ -s shot.png ] || { cat chromium.out; fail "chromium wrote no screenshot"; }
/usr/bin/python3 "$FTL_SOURCE_DIR/tests/launcher/png_check.py" shot.png 50 0.04 || fail "the screenshot looks blank"
[ -n "${FTL_KEEP_REPORT:-}" ] && mkdir -p "$FTL_KEEP_REPORT" && cp report.html shot.png "$FTL_KEEP_REPORT"/
echo ok
