# tests/bench/ckpt_smoke.sh: bench/ckpt/run.sh --smoke (2 ranks, 1 MiB, 3 repetitions, the page
# cache left alone) completes and prints its table.
. "$(dirname "$0")/lib.sh" || exit 1
run_bench 60 bash "$FTL_SOURCE_DIR/bench/ckpt/run.sh" --smoke "$FTL_BIN_DIR/.." "$SCRATCH/work"
expect_line '^ftl checkpoint bench: 2 ranks, state pre-faulted, 3 repetitions, max over ranks, ms$'
expect_line '^state +comparison +base med +ftl med +ratio \| +base min +ftl min +ratio \| +goal$'
row=" +$NUM +$NUM +$NUM"x' \|'" +$NUM +$NUM +$NUM"x' \|'
expect_line "^1 MiB +stall vs memcpy$row +<= 1.3$"
expect_line "^ +durable vs write\+fsync$row +<= 1.1$"
expect_line "^ +restore vs read \(warm\)$row +<= 1.1$"
expect_line "^ +stall vs sync HDF5\+fsync$row +-$"
expect_line "^ +stall, L1 on, vs memcpy$row +<= 1.3$"
expect_line "^ +restore L1 vs read \(warm\)$row +<= 0.2$"
expect_line "^ +restore L2 vs read \(warm\)$row +<= 0.5$"
