# tests/bench/launch_smoke.sh: bench-launch --smoke (bench/launch: ftl run against mpirun, then
# bench-allreduce --smoke, ftl_allreduce against MPI_Allreduce) completes and prints both tables.
. "$(dirname "$0")/lib.sh" || exit 1
run_bench 60 bench-launch --smoke
expect_line '^launch: 4 ranks of ftl-allreduce-check, 1 runs each, alternating \(seconds\)$'
expect_line '^ +min +median +max$'
expect_line "^mpirun -n 4 +$NUM +$NUM +$NUM$"
expect_line "^ftl run -n 4 +$NUM +$NUM +$NUM$"
expect_line "^ratio ftl/mpirun +$NUM +$NUM +\(goal <= 1.10 at the median\)$"
expect_line '^allreduce bandwidth, 2 ranks, .* median of 3 alternating rounds$'
expect_line '^ +size +MPI GB/s +ftl GB/s +ftl/MPI$'
for size in '1 KiB' '4 KiB' '16 KiB' '64 KiB'; do
  expect_line "^ +$size +$NUM +$NUM +$NUM$"
done
expect_line '^sizes below the 0.97 goal: [0-9]+$'
