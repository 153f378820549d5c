# tests/bench/cadence_smoke.sh: bench-cadence 1 10 (one seed of 10 MTBFs of work, bench/cadence) completes and prints its
# four tables, a row per true MTBF each, then the multi-level table (a row per failure mix), its two
# goal lines, then the paper's model on the paper's machines (a row per machine and failure factor)
# and its goal line.
. "$(dirname "$0")/lib.sh" || exit 1
run_bench 60 bench-cadence 1 10
expect_line '^bench-cadence: .* G = 64 ranks, 1 seeds,$'
expect_line '^Waste after the 5th failure \(the goal: adaptive ≤ 1.05× best fixed\)$'
expect_line '^Waste over the whole run'
expect_line "^The prior's weight"
expect_line '^Final adaptive interval'
expect_lines 2 '^\| true M \| Daly τ \| best fixed τ \| best fixed \| adaptive, prior M×10 \| adaptive, exact prior \| adaptive, prior M÷10 \| every 30 min \| every 1000 steps \|$'
ratio="$NUM% \($NUM×\)( \[gave up\])?"
for m in '10 min' '1 h' '6 h' '24 h' '100 h' '1000 h'; do
  expect_lines 2 "^\| $m \| [^|]+ \| [^|]+ \| $NUM% \|( $ratio \|){5}$"
  expect_lines 1 "^\| $m \| $NUM% \|( $NUM% \($NUM×\) \|){3}$"
done
expect_line '^Multi-level checkpoints: L1 node memory'
expect_lines 1 '^\| failure mix \(L1:L2:L3\) \| pattern \(τ1; L2, L3 every\) \| multi-level \| single-level \(Daly\) \| best single \| multi ÷ single \| controller \| model: pattern \| model: optimum \| pattern ÷ optimum \|$'
for mix in 'mostly process' 'balanced' 'mostly host'; do
  expect_lines 1 "^\| $mix \([0-9]+:[0-9]+:[0-9]+\) \| $NUM (min|h); [0-9]+, [0-9]+ \| $NUM% \| $NUM% \| $NUM% \| $NUM× \| $NUM% \| $NUM% \| $NUM% \| $NUM× \|$"
done
expect_line '^goal: multi-level waste lower than single-level at every mix: (met|NOT met)$'
expect_line '^goal: the multi-level pattern within 1\.05× of the model.s optimum: (met|NOT met)$'
expect_line "^The paper's model \\(Moody, Bronevetsky, Mohror, de Supinski, SC'10"
expect_lines 1 "^\\| machine \\| f \\| paper best \\(t; V1\\) \\| efficiency \\| ftl's plan \\(t; V1\\) \\| efficiency \\| ftl ÷ paper \\(waste\\) \\| PFS only \\|$"
for m in Coastal Atlas; do
  for f in 1 2 10 50; do
    expect_lines 1 "^\\| $m \\| $f \\| [0-9]+ s; [0-9]+ \\| $NUM% \\| [0-9]+ s; [0-9]+ \\| $NUM% \\| $NUM× \\| $NUM% \\|$"
  done
done
expect_line "^goal: ftl's plan within 1\\.05× of the paper model's best waste on the paper's machines: (met|NOT met)$"
