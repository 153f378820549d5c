# tests/launcher/mfu_run.sh: model FLOPs utilisation end to end (docs/gpu.md, "Useful work: MFU"),
# with tests/launcher/flops_probe.c reporting known FLOPs at a known pace:
#  1. a job spec's peak (mfu.peak_tflops): bad FLOPs counts are refused (FTL_ERR_INVAL, named); the
#     attempt's final `mfu` event counts exactly the FLOPs reported; its MFU is the rate the
#     `progress` events show (rank 0's steps per second, whatever this machine's pace) over the peak;
#     `ftl status` (text and --json), the metrics textfile, `ftl report` and the run's summary line
#     ("goodput G% × MFU M% = useful work U%") all say it;
#  2. the same without relays (FTL_RELAY=0: each rank's heartbeats straight to the launcher);
#  3. GPUs from the fake NVML: "NVIDIA H100 80GB HBM3" picks the table's H100 row (bf16 989.4 TFLOPS),
#     two GPUs of two models are each rank's own (local rank mod the host's GPUs) in tf32;
#  4. a GPU the table does not know: MFU "unknown (no peak for 'NAME'; set mfu.peak_tflops)", never a
#     guess, and no MFU metric;
#  5. a program that reports no FLOPs: nothing is said of MFU anywhere.
. "$(dirname "$0")/lib.sh" || exit 1
CHECK="python3 $FTL_SOURCE_DIR/tests/launcher/metrics_check.py"
unset FTL_NVML_FAKE

probe_spec() { # NAME STEPS STEP_MS FLOPS [EXTRA YAML LINE]: a job spec of 2 ranks of the probe
  cat >"$1.yaml" <<YAML
name: $1
ranks: 2
program: flops_probe
args: ["--steps", "$2", "--step-ms", "$3", "--flops", "$4", "--check-invalid", "--marker", "$MARKER"]
restart: {max_restarts: 0}
${5:-}
YAML
}

# 1. The job spec's peak: 4e12 FLOPs a step per rank, 100 ms a step, 200 TFLOPS a rank.
probe_spec spec 40 100 4e12 "mfu: {peak_tflops: 200}"
run_ftl spec.out run --progress off --metrics-textfile spec.prom --run-dir spec spec.yaml
expect_rc 0 spec.out
for r in 0 1; do expect_contains spec/attempt-0000/rank-0000$r.out "rank $r: validation ok"; done
run_ftl status.out status spec
run_ftl status.json status spec --json
run_ftl report.out report spec -o report.html
expect_rc 0 report.out
$CHECK spec.prom ftl_mfu_ratio='*' ftl_useful_work_ratio='*' ftl_model_flops_per_second='*' \
  ftl_peak_flops_per_second=400000000000000 ftl_job=spec || fail "bad metrics textfile"
python3 - spec/events.jsonl status.json spec.prom spec.out report.html status.out <<'PY' || fail "MFU is not the reported FLOPs' rate over the peak"
import json, re, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
final = [e for e in ev if e["event"] == "mfu" and e.get("final")]
assert len(final) == 1, final
f = final[0]
assert f["model_flops"] == 40 * 4e12 * 2, f
assert f["peak_source"] == "spec" and f["peak_flops"] == 400e12, f
assert "mfu.peak_tflops 200 per rank × 2 ranks" in f["peak"], f
# The expectation from the pace rank 0's progress reports show on its own clock (their tokens_per_s,
# 100 tokens a step): the events' times are when the launcher wrote them, and one report read late
# (seen under TSan: 8.1 steps/s by the events' times against 10 on the rank's) says nothing of MFU.
prog = [e for e in ev if e["event"] == "progress"]
assert len(prog) >= 3, prog
b = prog[-1]
rates = sorted(e["tokens_per_s"] for e in prog if e.get("tokens_per_s", -1) > 0)
assert len(rates) >= 2, prog
steps_per_s = rates[len(rates) // 2] / (b["tokens"] / b["step"])
want = 4e12 * 2 * steps_per_s / 400e12
print(f"steps/s {steps_per_s:.3f}: MFU expected {want:.4f}, the launcher's {f['avg_mfu']:.4f} (recent {f['mfu']:.4f})")
assert abs(f["avg_mfu"] - want) <= 0.1 * want, (f, want)
assert abs(f["mfu"] - want) <= 0.1 * want, (f, want)
# Progress events carry the latest figure once there is one.
assert any("mfu" in e for e in prog), prog
st = json.load(open(sys.argv[2]))
uw = st["useful_work"]
assert abs(uw["mfu"] - want) <= 0.1 * want and uw["peak_source"] == "spec", uw
gp = st["goodput"]["goodput_pct"]
assert abs(uw["useful_work_pct"] - gp * uw["mfu"]) < 1e-9, (uw, gp)
prom = dict(l.split("{")[0:1] + [l.rsplit(" ", 1)[1]] for l in open(sys.argv[3]) if l.startswith("ftl_"))
assert abs(float(prom["ftl_mfu_ratio"]) - uw["mfu"]) < 1e-9, (prom, uw)
# The run's summary line: goodput × MFU = useful work.
m = re.search(r"ftl: goodput ([0-9.]+)% × MFU ([0-9.]+)% = useful work ([0-9.]+)% \(MFU of the job spec's peak", open(sys.argv[4]).read())
assert m, "no useful-work line in ftl run's summary"
g, mfu, u = map(float, m.groups())
assert abs(mfu / 100 - want) <= 0.1 * want and abs(u - g * mfu / 100) < 0.1, m.groups()
html = open(sys.argv[5]).read()
assert "<h2>Useful work</h2>" in html and "× MFU" in html and "model FLOPs utilisation against step" in html, "report lacks useful work"
text = open(sys.argv[6]).read()
assert re.search(r"^goodput [0-9.]+% × MFU [0-9.]+% = useful work [0-9.]+% \(MFU of the job spec's peak", text, re.M), text
PY

# 2. Without relays: the heartbeats' FLOPs straight to the launcher, counted the same.
probe_spec direct 20 50 1e12 "mfu: {peak_tflops: 100}"
FTL_RELAY=0 run_ftl direct.out run --progress off --run-dir direct direct.yaml
expect_rc 0 direct.out
grep '"event":"mfu"' direct/events.jsonl | grep '"final":true' | grep -q '"model_flops":40000000000000' ||
  { grep '"event":"mfu"' direct/events.jsonl >&2; fail "without relays the FLOPs were not all counted"; }

# 3. GPUs from the fake NVML: the table's peak by NVML's name, each rank's own GPU.
cat >h100.json <<'JSON'
{"version": 1, "devices": [{"readings": [{"uuid": "GPU-h100", "name": "NVIDIA H100 80GB HBM3"}]}]}
JSON
probe_spec h100 20 50 1e12
FTL_NVML_FAKE=$PWD/h100.json run_ftl h100.out run --progress off --run-dir h100 h100.yaml
expect_rc 0 h100.out
cat >two.json <<'JSON'
{"version": 1, "devices": [{"readings": [{"uuid": "GPU-0", "name": "NVIDIA H100 80GB HBM3"}]},
                           {"readings": [{"uuid": "GPU-1", "name": "NVIDIA A100-SXM4-80GB"}]}]}
JSON
probe_spec two 20 50 1e12 "mfu: {precision: tf32}"
FTL_NVML_FAKE=$PWD/two.json run_ftl two.out run --progress off --run-dir two two.yaml
expect_rc 0 two.out
python3 - h100/events.jsonl two/events.jsonl <<'PY' || fail "the GPUs' peaks are not the table's"
import json, sys
def final(path):
    f = [json.loads(l) for l in open(path) if '"event":"mfu"' in l and '"final":true' in l]
    assert len(f) == 1, f
    return f[0]
h = final(sys.argv[1])
assert h["peak_source"] == "table" and abs(h["peak_flops"] - 2 * 989.4e12) < 1, h
assert "2 × NVIDIA H100 80GB HBM3 (H100 SXM, bf16 989.4 TFLOPS each)" == h["peak"], h
assert abs(h["avg_mfu"] - h["avg_model_flops_per_s"] / h["peak_flops"]) < 1e-12, h
t = final(sys.argv[2])
assert t["peak_source"] == "table" and abs(t["peak_flops"] - (494.7e12 + 156e12)) < 1, t
print("table peaks ok:", h["peak"], "|", t["peak"])
PY

# 4. A GPU the table does not name: unknown, never a guess.
cat >odd.json <<'JSON'
{"version": 1, "devices": [{"readings": [{"uuid": "GPU-odd", "name": "Acme Tensor 9000"}]}]}
JSON
probe_spec odd 10 50 1e12
FTL_NVML_FAKE=$PWD/odd.json run_ftl odd.out run --progress off --metrics-textfile odd.prom --run-dir odd odd.yaml
expect_rc 0 odd.out
expect_contains odd.out "ftl: MFU unknown (no peak for 'Acme Tensor 9000'; set mfu.peak_tflops)"
run_ftl oddstatus.out status odd
expect_contains oddstatus.out "MFU unknown (no peak for 'Acme Tensor 9000'; set mfu.peak_tflops)"
grep -q '^ftl_mfu_ratio' odd.prom && fail "an MFU metric without a known peak"
grep -q '"event":"run_goodput".*"mfu_pct"' odd/events.jsonl && fail "run_goodput has an MFU without a known peak"

# 5. No FLOPs reported: nothing of MFU, not a zero.
probe_spec none 10 50 1e12
sed -i 's/"--check-invalid"/"--no-flops"/' none.yaml
run_ftl none.out run --progress off --metrics-textfile none.prom --run-dir none none.yaml
expect_rc 0 none.out
run_ftl nonestatus.out status none
run_ftl nonestatus.json status none --json
for f in none.out nonestatus.out none.prom; do grep -qi 'mfu\|flops' $f && fail "$f speaks of MFU for a program that reports no FLOPs"; done
grep -q '"useful_work": *null' nonestatus.json || fail "status --json: useful_work is not null"
grep -q '"event":"mfu"' none/events.jsonl && fail "an mfu event for a program that reports no FLOPs"
expect_no_leftovers
echo ok
