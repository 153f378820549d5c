# The ranks get the snapshot's record and input paths (FTL_SNAPSHOT, FTL_INPUT_<NAME>); an input
# changed between attempts stops the relaunch, naming the file (here a file inside a folder input,
# changed by the first attempt itself before it crashes); an input deleted by the first attempt
# stops the relaunch too (it is not "no snapshot"); an input missing at submission stops the
# submission (exit 2); a run directory resumed with its inputs unchanged goes on.
. "$FTL_SOURCE_DIR/tests/launcher/lib.sh" || exit 1
mkdir -p data/sub
echo one >data/a.txt
echo two >data/sub/b.txt
echo w >base.bin
cat >prog.sh <<'EOS'
#!/usr/bin/env bash
env | grep -E '^FTL_(SNAPSHOT|INPUT_)' | sort >"env.$FTL_ATTEMPT"
if [ "$FTL_ATTEMPT" = 0 ] && [ -f crash-once ]; then echo changed >>"$FTL_INPUT_DATA/sub/b.txt"; exit 3; fi
if [ "$FTL_ATTEMPT" = 0 ] && [ -f delete-once ]; then mv "$FTL_INPUT_BASE" base.gone; exit 3; fi
exit 0
EOS
chmod +x prog.sh
cat >job.yaml <<EOS
name: relaunch
ranks: 1
program: ./prog.sh
working_dir: $SCRATCH
restart: {max_restarts: 2, backoff_s: 0.1}
inputs: {data: data, base: base.bin}
EOS
touch crash-once
run_ftl out1 run --run-dir r1 job.yaml
expect_rc 1 out1
expect_contains out1 "not relaunched: input 'data' changed after submission: $SCRATCH/data/sub/b.txt"
expect_contains env.0 "FTL_SNAPSHOT=$SCRATCH/r1/snapshot.json"
expect_contains env.0 "FTL_INPUT_DATA=$SCRATCH/data"
expect_contains env.0 "FTL_INPUT_BASE=$SCRATCH/base.bin"
[ ! -f env.1 ] || fail "a second attempt started on changed data"
# A fresh run directory with unchanged inputs runs; resuming it with the same inputs goes on.
rm -f crash-once env.*
run_ftl out2 run --run-dir r2 job.yaml
expect_rc 0 out2
run_ftl out3 run --run-dir r2 job.yaml
expect_rc 0 out3
expect_contains out3 "inputs verified against"
# An input deleted between attempts: the relaunch is refused, naming it.
touch delete-once
run_ftl out5 run --run-dir r4 job.yaml
expect_rc 1 out5
expect_contains out5 "not relaunched: input 'base' changed after submission"
[ ! -f r4/attempt-0001/rank-00000.out ] && [ ! -d r4/attempt-0001 ] || fail "a second attempt started without an input"
rm -f delete-once
mv base.gone base.bin
# An input that does not exist at submission: nothing starts.
rm base.bin
run_ftl out4 run --run-dir r3 job.yaml
expect_rc 2 out4
expect_contains out4 "input 'base'"
[ -z "$(ls -d r3/attempt-* 2>/dev/null)" ] || fail "ranks started without an input"
echo "ok"
