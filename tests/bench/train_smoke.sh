# tests/bench/train_smoke.sh: bench/train/run.sh at its smallest size (--rounds 2
# --steps-per-round 2) completes under `ftl run -n 1` and prints both tables.
. "$(dirname "$0")/lib.sh" || exit 1
run_bench 60 bash "$FTL_SOURCE_DIR/bench/train/run.sh" "$FTL_BIN_DIR/.." --rounds 2 --steps-per-round 2 --pass-reps 3
expect_line '^CPU path, one process: 2 layers, 64 channels, 4 heads, 18 positions, batch 8'
expect_line '^ +pass +ms/batch +tokens/s$'
for pass in 'forward \(evaluation\)' 'forward \+ backward \(fine-tune\)' 'forward \+ backward \(pre-train\)'; do
  expect_line "^ +$pass +$NUM +[0-9]+$"
done
expect_line '^per-step overhead, 4 steps each, interleaved'
expect_line '^ +step +ms/step +ratio +overhead +calls us +median +in calls$'
row=" +$NUM +$NUM +-?$NUM% +$NUM +$NUM +$NUM%$"
expect_line "^ +bare \(forward, backward, allreduce, AdamW\)$row"
expect_line "^ +\+ ftl_step_done$row"
expect_line "^ +\+ ftl_step_done \+ checkpoint calls \(none due\)$row"
expect_line "^goal: ftl's per-step calls cost under 1% of a step: (met|NOT met) \($NUM% measured inside the calls\)$"
