# The gate as a promise that holds (issue 18): each attack the issue reproduced on main, refused.
#   a failed verdict edited to passed:true              -> publish re-derives it: exit 1
#   the gate object rewritten (threshold 0) and the snapshot's digest recomputed, then gate_sha256
#   too                                                 -> refused (gate_sha256; the registry lock)
#   a fake evaluator earlier on PATH                    -> not run: the pinned path is
#   the evaluator's bytes changed                       -> refused, naming it
#   min_gain's baseline version deleted, the registry root gone -> errors, not "no baseline"
#   a FIFO metrics file, an input replaced by a FIFO or a link to /dev/zero -> errors, in time
#   an input given as a link, retargeted               -> gate, publish and a relaunch refuse it
#   a setsid child of the evaluator                     -> ended with the gate
#   3 MiB of evaluator stdout                           -> 1 MiB kept, "cut" said
#   two gates at once                                   -> the second waits, then names the holder
#   an erring gate after a passing one                  -> no verdict left, status is not "passed"
#   the same adapter re-gated and re-published          -> the same version id
#   a metric of 1e309                                   -> "not finite", exit 1
. "$(dirname "$0")/lib.sh" || exit 1
export STRAY_TAG="$MARKER-$$"
mkdir -p bin bin2
cp "$FTL_SOURCE_DIR/tests/eval/fake_eval.sh" bin/gate-fake-eval
printf '#!/bin/sh\nprintf %s "{\\"version\\":1,\\"metrics\\":{\\"score\\":0.99}}" >"$1"\n' '%s' >bin2/gate-fake-eval
chmod +x bin/gate-fake-eval bin2/gate-fake-eval
# heldout is given through a symbolic link (the ranks and the evaluator read the link).
mv data/heldout.txt data/heldout.real
ln -s heldout.real data/heldout.txt
echo "value:0.95" >mode
write_job atk.yaml gatk "$(fake_eval gate-fake-eval 5)" 'path: reg'
PATH="$SCRATCH/bin:$PATH" run_ftl out.run run --run-dir ra atk.yaml
expect_rc 0 out.run
expect_contains out.run "gate locked in the registry"
id1=$(sed -n 's/.*published gatk version \([0-9a-f]\{64\}\).*/\1/p' out.run)
[ -n "$id1" ] || fail "no version id printed"
ls reg/gatk/gate-locks/*.json >/dev/null || fail "no gate lock in the registry"
grep -q '"action":"gate_lock"' reg/gatk/audit.jsonl || fail "no gate_lock line in the registry's audit log"
grep -q '"link": "'"$SCRATCH"'/data/heldout.txt"' ra/snapshot.json || fail "the snapshot does not record the link"
expect_contains ra/snapshot.json "\"path\": \"$SCRATCH/bin/gate-fake-eval\""

# The same adapter re-gated and re-published: the same version.
run_ftl out.g0 gate ra
expect_rc 0 out.g0
run_ftl out.p0 publish ra
expect_rc 0 out.p0
expect_contains out.p0 "version $id1"

# A failed verdict edited to passed:true: publish re-derives it.
echo "value:0.5" >mode
run_ftl out.g1 gate ra
expect_rc 1 out.g1
sed -i 's/"passed": false/"passed": true/' ra/verdict.json
run_ftl out.p1 publish ra
expect_rc 1 out.p1
expect_contains out.p1 "did not pass when re-derived"
[ "$(ls reg/gatk/versions | grep -c .)" = 1 ] || fail "a failed run was published"

# The gate rewritten with threshold 0, the snapshot's digest recomputed; then gate_sha256 too.
cp ra/snapshot.json snap.bak
rewrite() { # rewrite WITH_GATE_SHA: threshold 0, digests recomputed as jansson writes them
  python3 - "$1" <<'PY'
import json, hashlib, sys
def enc(v):
    if isinstance(v, bool): return "true" if v else "false"
    if v is None: return "null"
    if isinstance(v, float):
        t = "%.17g" % v
        return t if any(c in t for c in ".eE") else t + ".0"
    if isinstance(v, int): return str(v)
    if isinstance(v, str): return json.dumps(v, ensure_ascii=True)
    if isinstance(v, list): return "[" + ",".join(enc(x) for x in v) + "]"
    return "{" + ",".join(json.dumps(k, ensure_ascii=True) + ":" + enc(v[k]) for k in sorted(v)) + "}"
s = json.load(open("ra/snapshot.json"))
s["gate"]["eval"]["threshold"] = 0.0
if sys.argv[1] == "1": s["gate_sha256"] = hashlib.sha256(enc(s["gate"]).encode()).hexdigest()
del s["digest"]
s["digest"] = hashlib.sha256(enc(s).encode()).hexdigest()
json.dump(s, open("ra/snapshot.json", "w"), indent=2, sort_keys=True)
PY
}
rewrite 0
run_ftl out.g2 gate ra
expect_rc 2 out.g2
expect_contains out.g2 "'gate_sha256' is not the SHA-256 of its 'gate'"
cp snap.bak ra/snapshot.json
rewrite 1
run_ftl out.g3 gate ra
expect_rc 2 out.g3
expect_contains out.g3 "does not match the gate locked in the registry"
expect_contains out.g3 "field 'eval.threshold'"
run_ftl out.p3 publish ra
expect_rc 2 out.p3
expect_contains out.p3 "field 'eval.threshold'"
cp snap.bak ra/snapshot.json

# A fake evaluator earlier on PATH is not what runs; changed bytes of the pinned one are refused.
PATH="$SCRATCH/bin2:$PATH" run_ftl out.g4 gate ra
expect_rc 1 out.g4
expect_contains out.g4 "running the evaluator $SCRATCH/bin/gate-fake-eval"
cp bin/gate-fake-eval eval.bak
echo "# changed" >>bin/gate-fake-eval
run_ftl out.g5 gate ra
expect_rc 2 out.g5
expect_contains out.g5 "the evaluator $SCRATCH/bin/gate-fake-eval changed after submission"
cp eval.bak bin/gate-fake-eval

# A FIFO metrics file, an input replaced by a FIFO or by a link to /dev/zero: errors, not hangs.
echo fifo >mode
timeout 60 ftl gate ra >out.g6 2>&1; RC=$?
expect_rc 2 out.g6
expect_contains out.g6 "not a regular file"
echo "value:0.95" >mode
mv data/heldout.real heldout.keep
mkfifo data/heldout.real
timeout 60 ftl gate ra >out.g7 2>&1; RC=$?
expect_rc 2 out.g7
expect_contains out.g7 "input 'heldout'"
rm data/heldout.real
ln -s /dev/zero data/heldout.real
timeout 60 ftl gate ra >out.g8 2>&1; RC=$?
expect_rc 2 out.g8
expect_contains out.g8 "input 'heldout'"
rm data/heldout.real
mv heldout.keep data/heldout.real

# The input's link retargeted: the gate, publish and a relaunch refuse it, naming it.
cp data/heldout.real data/heldout.other
echo "abcdefgh>bcdefghi" >>data/heldout.other
ln -sfn heldout.other data/heldout.txt
run_ftl out.g9 gate ra
expect_rc 2 out.g9
expect_contains out.g9 "input 'heldout' changed after submission: $SCRATCH/data/heldout.txt: the link resolves to"
run_ftl out.p9 publish ra
expect_rc 2 out.p9
expect_contains out.p9 "input 'heldout'"
PATH="$SCRATCH/bin:$PATH" run_ftl out.r9 run --run-dir ra atk.yaml
expect_rc 2 out.r9
expect_contains out.r9 "input 'heldout'"
ln -sfn heldout.real data/heldout.txt

# An erring gate after a passing one leaves no verdict, and status does not say passed.
run_ftl out.g10 gate ra
expect_rc 0 out.g10
echo crash >mode
run_ftl out.g11 gate ra
expect_rc 2 out.g11
[ ! -f ra/verdict.json ] || fail "an erring gate left the earlier verdict"
ftl status ra --json >status.json 2>&1
grep -q '"passed": true' status.json && fail "ftl status says passed after an erring gate"

# The evaluator's setsid child ends with the gate; its stdout is capped.
echo "setsid:0.95" >mode
run_ftl out.g12 gate ra
expect_rc 0 out.g12
sleep 0.3
pgrep -f "stray-$STRAY_TAG" >/dev/null && { pkill -f "stray-$STRAY_TAG"; fail "the evaluator's setsid child outlived the gate"; }
echo "huge:0.95" >mode
run_ftl out.g13 gate ra
expect_rc 0 out.g13
expect_contains out.g13 "was cut at 1048576 bytes"
size=$(stat -c %s ra/gate/eval.out)
[ "$size" -le 1049000 ] || fail "eval.out kept $size bytes"
expect_contains ra/gate/eval.out "[ftl gate: output cut at 1048576 bytes; 3145728 bytes were written]"

# A metric of 1e309 is not finite (exit 1), not "not JSON".
echo inf >mode
run_ftl out.g14 gate ra
expect_rc 1 out.g14
expect_contains out.g14 "score is not finite"

# Two gates at once: the second waits for the lock, then names the holder.
echo sleep >mode
ftl gate ra >out.g15 2>&1 &
first=$!
for _ in $(seq 400); do grep -q "ftl gate: pid $first " ra/gate/lock 2>/dev/null && break; sleep 0.05; done
grep -q "ftl gate: pid $first " ra/gate/lock || fail "the first gate did not take the lock"
FTL_GATE_LOCK_TIMEOUT_S=0.5 run_ftl out.g16 gate ra
expect_rc 2 out.g16
expect_contains out.g16 "another gate or publish holds"
expect_contains out.g16 "ftl gate: pid $first"
wait $first

# min_gain with a baseline channel: the first publish has none; a deleted baseline version or a
# missing registry root is an error, not "no baseline".
echo "value:0.95" >mode
write_job min.yaml gmin "$(fake_eval gate-fake-eval 5 "min_gain: 0.01" "baseline_channel: prod")" 'path: reg2'
PATH="$SCRATCH/bin:$PATH" run_ftl out.m0 run --run-dir rb min.yaml
expect_rc 0 out.m0
mid=$(sed -n 's/.*published gmin version \([0-9a-f]\{64\}\).*/\1/p' out.m0)
ftl promote gmin "$mid" --to prod --registry reg2 >/dev/null 2>&1 || fail "promote failed"
echo "value:0.97" >mode
run_ftl out.m1 gate rb
expect_rc 0 out.m1
expect_contains out.m1 "over prod"
mv reg2/gmin/versions/"$mid" moved-version
run_ftl out.m2 gate rb
expect_rc 2 out.m2
expect_contains out.m2 "the baseline gmin@prod"
mv moved-version reg2/gmin/versions/"$mid"
mv reg2 reg2.unmounted
run_ftl out.m3 gate rb
expect_rc 2 out.m3
expect_contains out.m3 "is not there"
mv reg2.unmounted reg2
expect_no_leftovers
echo "ok"
