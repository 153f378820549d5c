# tests/bench/scale_smoke.sh: bench/scale/run.sh --smoke (N = 64: a real `ftl run` whose mpirun is
# ftl-scale-sim, then ftl-scale-ckpt's commit and catalog tables) completes and prints its tables.
. "$(dirname "$0")/lib.sh" || exit 1
run_bench 100 bash "$FTL_SOURCE_DIR/bench/scale/run.sh" --smoke "$FTL_BIN_DIR/.."
expect_line '^launcher at scale: one real ftl launcher, N simulated ranks \+ agents over loopback'
expect_line '^ +N +rdzv ms +rdzv cpu +detect ms +teardown +restart +rdzv2 ms +cpu % +rss KiB +KiB/rank$'
expect_line "^ +64 +$NUM +$NUM +$NUM +$NUM +$NUM +$NUM +$NUM +[0-9]+ +-$"
expect_line '^ratio to N=64 \(N ratio, N log N ratio\)$'
expect_line '^ +N +commit ms +of it write +commit cpu +plan ms +manifest KiB$'
expect_line "^ +64 +$NUM +$NUM +$NUM +$NUM +$NUM$"
expect_line "^  scan \(ck_list_steps\) +$NUM ms"
expect_line "^  ftl ckpt ls \(the command, a process\) +$NUM ms \($NUM us per step, 200 steps listed\)$"
