# The operator's live view of a run of the example fine-tune: `--progress lines` prints plain
# periodic lines (no escape codes) in a log; on a terminal (a pty from `script`, TERM=xterm) the
# line is redrawn in place with "\r" and clear-to-EOL; `--progress off` prints none; rank 0's
# reports land in events.jsonl as `progress` events (loss against step); the Prometheus textfile
# (FTL_METRICS_TEXTFILE, or the spec's metrics.textfile) is valid exposition text, says ftl_up 1
# while the job runs and holds the final values (ftl_up 0, the last step, the committed step),
# with the label ftl_job (not `job`, which Prometheus sets on the target itself) and base units
# (ftl_mtbf_seconds), and `promtool check metrics` accepts each file without a word (skipped, 77,
# at the end only where promtool is not installed; scripts/setup-deps.sh installs it).
. "$FTL_SOURCE_DIR/tests/finetune/lib.sh" || exit 1
CHECK="python3 $FTL_SOURCE_DIR/tests/launcher/metrics_check.py"
# promtool_ok FILE: promtool's parser and linter accept FILE and say nothing.
have_promtool=0
command -v promtool >/dev/null && have_promtool=1
promtool_ok() {
  [ $have_promtool = 1 ] || return 0
  promtool check metrics <"$1" >promtool.out 2>&1
  local rc=$?
  [ $rc = 0 ] && [ ! -s promtool.out ] || { cat promtool.out; fail "promtool check metrics rejects $1 (exit $rc)"; }
}
ARGS=("${FT_ARGS[@]}" --ckpt-every 5 --throttle-ms 40)

# Lines mode and the textfile named by the environment, looked at while the job runs.
FTL_METRICS_TEXTFILE=$PWD/live.prom ftl run -n 2 --progress lines --progress-interval 0.2 --run-dir lines -- \
  ftl-finetune "${ARGS[@]}" >lines.out 2>&1 &
pid=$!
seen_up=0
for _ in $(seq 300); do
  if [ -f live.prom ] && grep -q '^ftl_up{ftl_job="ftl-finetune"} 1$' live.prom && grep -q '^ftl_step{[^}]*} [1-9]' live.prom; then
    cp live.prom mid.prom && seen_up=1 && break
  fi
  kill -0 $pid 2>/dev/null || break
  sleep 0.05
done
wait_rc $pid
expect_rc 0 lines.out
[ $seen_up = 1 ] || fail "the metrics textfile never said ftl_up 1 with a step while the job ran"
$CHECK mid.prom ftl_up=1 ftl_job=ftl-finetune ftl_step='*' ftl_restarts_total=0 || fail "bad textfile while running"
promtool_ok mid.prom
$CHECK live.prom ftl_up=0 ftl_step=40 ftl_total_steps=40 ftl_last_committed_step=40 ftl_restarts_total=0 \
  ftl_exit_code=0 ftl_checkpoint_interval_steps=5 ftl_loss='*' ftl_tokens_per_second='*' ftl_goodput_ratio='*' \
  ftl_checkpoint_interval_seconds='*' ftl_mtbf_seconds='*' ftl_job=ftl-finetune || fail "bad final textfile"
promtool_ok live.prom
grep -q '_hours' live.prom && fail "a metric in hours (Prometheus' base unit is seconds)"
expect_contains lines.out "ftl: step 40/40 (100%) loss "
[ "$(grep -c '^ftl: step ' lines.out)" -ge 2 ] || { cat lines.out; fail "expected several progress lines"; }
grep -q $'\e' lines.out && fail "lines mode wrote escape sequences"
grep -q $'\r' lines.out && fail "lines mode wrote carriage returns"
n=$(grep -c '"event":"progress"' lines/events.jsonl)
[ "$n" -ge 2 ] || fail "expected progress events in events.jsonl, found $n"
grep '"event":"progress"' lines/events.jsonl | tail -1 | grep -q '"step":40' || fail "the last progress event is not step 40"
grep '"event":"progress"' lines/events.jsonl | grep -q '"loss":[0-9]' || fail "progress events carry no loss"

# On a terminal: redrawn in place; TERM=dumb falls back to lines; off prints nothing.
if command -v script >/dev/null; then
  TERM=xterm script -qfec "ftl run -n 2 --run-dir tty -- ftl-finetune ${ARGS[*]}" tty.out >/dev/null 2>&1
  grep -q $'\r\e\[K\|\e\[K' tty.out || { cat -v tty.out | tail -5; fail "no in-place redraw on a terminal"; }
  grep -a -q 'ftl: step 40/40' tty.out || fail "the terminal never showed step 40/40"
  TERM=dumb script -qfec "ftl run -n 2 --progress-interval 0.2 --run-dir dumb -- ftl-finetune ${ARGS[*]}" dumb.out >/dev/null 2>&1
  grep -q $'\e\[K' dumb.out && fail "TERM=dumb got escape sequences"
  grep -a -q '^ftl: step ' dumb.out || fail "TERM=dumb: expected plain progress lines"
fi
run_ftl off.out run -n 2 --progress off --run-dir off -- ftl-finetune "${ARGS[@]}"
expect_rc 0 off.out
grep -q '^ftl: step ' off.out && fail "--progress off printed progress"

# The spec's metrics.textfile, and a bad --progress.
cat >job.yaml <<YAML
name: specjob
ranks: 2
program: ftl-finetune
args: [$(printf '"%s", ' "${ARGS[@]}" | sed 's/, $//')]
metrics:
  textfile: spec.prom
YAML
run_ftl spec.out run --progress off --run-dir spec job.yaml
expect_rc 0 spec.out
$CHECK spec.prom ftl_up=0 ftl_step=40 ftl_exit_code=0 ftl_job=specjob || fail "bad textfile from the spec"
promtool_ok spec.prom
run_ftl bad.out run --progress sometimes -n 1 -- true
expect_rc 2 bad.out
expect_contains bad.out "--progress: expected auto, tty, lines or off"
expect_no_leftovers
[ $have_promtool = 1 ] || { echo "skipped: promtool is not installed (the textfiles were not linted)"; exit 77; }
echo ok
