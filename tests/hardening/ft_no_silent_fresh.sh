#!/usr/bin/env bash
# Issue 11, item 1: a run directory that ever committed a step never starts from scratch by itself.
#  a. every committed step corrupt (one flipped tensor byte each): the run fails (all attempts and a
#     rerun), naming the steps and shards, and never trains from step 0; the steps are kept, marked
#     bad with the reason;
#  b. FTL_CKPT_ALLOW_FRESH=1 (the documented flag) starts fresh and finishes;
#  c. a missing shard (a storage blip) fails the restore without condemning the step: no
#     manifest.json.bad; with the shard put back, the next run resumes from that step.
. "$FTL_SOURCE_DIR/tests/hardening/lib.sh" || exit 1

# expect_refused OUT IF_ZERO IF_FRESH TEXT...: another run on r1 fails (else: IF_ZERO), saying that
# no committed step is usable and each TEXT, and never trains from step 0 (else: IF_FRESH).
expect_refused() {
  local out=$1 if_zero=$2 if_fresh=$3 t
  shift 3
  ft_run "$out" r1 2
  [ "$RC" -ne 0 ] || { cat "$out" >&2; fail "$if_zero"; }
  expect_contains "$out" "none usable"
  for t in "$@"; do expect_contains "$out" "$t"; done
  if grep -q "starting at step 0" "$out"; then fail "$if_fresh"; fi
}

# unfinish RUNDIR: the run as if stopped before its end (a preemption): its final adapter and the
# record of its end gone, so the next run restores from its checkpoints (a finished run would not).
unfinish() { rm -rf "$1/final" "$1/finish.json"; }

# a. Every committed step corrupt.
ft_run ok.out r1 2
expect_rc 0 ok.out
unfinish r1
steps=$(committed_steps r1)
[ -n "$steps" ] || fail "the first run committed nothing"
for s in $steps; do flip_tensor_byte r1 "$s" 0; done
ev0=$(wc -l <r1/events.jsonl)
expect_refused corrupt.out "a run whose every step is corrupt exited 0" "the run started from scratch" \
  "checksum mismatch" "shard-00000.h5"
tail -n +"$((ev0 + 1))" r1/events.jsonl | grep -q '"ckpt_fresh_start"' && fail "a fresh start was recorded in the events"
for s in $steps; do
  sd=$(step_dir r1 "$s")
  [ -f "$sd/manifest.json.bad" ] && [ -f "$sd/bad-reason.txt" ] || fail "step $s was not kept, marked bad"
  [ -f "$sd/shard-00000.h5" ] || fail "step $s lost its data"
  grep -q "checksum mismatch" "$sd/bad-reason.txt" || fail "step $s: no reason recorded"
done
[ -f r1/checkpoints/COMMITTED ] || fail "no commit marker in checkpoints/"
# The rerun the docs recommend sees nothing committed any more: it must still refuse.
expect_refused rerun.out "the rerun started from scratch and exited 0" "the rerun started from scratch" \
  "marked bad" "FTL_CKPT_ALLOW_FRESH"

# b. The documented flag: a fresh start, and the new run commits and finishes.
FTL_CKPT_ALLOW_FRESH=1 ft_run fresh.out r1 2
expect_rc 0 fresh.out
expect_contains fresh.out "starting at step 0"
[ -n "$(committed_steps r1)" ] || fail "the fresh run committed nothing"

# c. A missing shard is not proof of corruption.
ft_run t.out r2 2
expect_rc 0 t.out
unfinish r2
steps=$(committed_steps r2)
last=$(echo "$steps" | tail -n1)
mkdir -p aside
for s in $steps; do mv "$(step_dir r2 "$s")/shard-00001.h5" "aside/$s.h5"; done
run_ftl blip.out run -n 2 --max-restarts 0 --run-dir r2 -- ftl-finetune "${FT_ARGS[@]}" --ckpt-every 7
[ "$RC" -ne 0 ] || { cat blip.out >&2; fail "a run with every step missing a shard exited 0"; }
expect_contains blip.out "shard-00001.h5 does not exist"
grep -q "starting at step 0" blip.out && fail "the run started from scratch"
for s in $steps; do
  [ -f "$(step_dir r2 "$s")/manifest.json" ] || fail "step $s was condemned for a missing shard"
  [ ! -e "$(step_dir r2 "$s")/manifest.json.bad" ] || fail "step $s marked bad for a missing shard"
done
for s in $steps; do mv "aside/$s.h5" "$(step_dir r2 "$s")/shard-00001.h5"; done
ft_run back.out r2 2
expect_rc 0 back.out
expect_contains back.out "resumed from the checkpoint of step $last"
echo "PASS"
