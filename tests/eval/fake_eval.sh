#!/usr/bin/env bash
# tests/eval/fake_eval.sh METRICS MODE_FILE: an evaluator for the gate's tests. What it does is
# read from MODE_FILE at each run (the gate spec, with these arguments, stays locked):
#   value:X   writes {"version":1,"metrics":{"score":X}}      nan: score is NaN
#   missing   writes a metrics file without "score"           garbage: not JSON
#   sleep     never finishes (the deadline test)              crash: exits 3
#   fifo      leaves a FIFO where the metrics file belongs        inf: score is 1e309
#   setsid:X  starts a child in a new session (`stray-$STRAY_TAG`), then writes score X
#   huge:X    prints 3 MiB on stdout, then writes score X
# It also saves its environment to METRICS.env, so a test can check what the gate passed.
metrics=$1
mode=$(cat "$2")
env >"$metrics.env"
case "$mode" in
  value:*) printf '{"version": 1, "metrics": {"score": %s}}\n' "${mode#value:}" >"$metrics" ;;
  nan) printf '{"version": 1, "metrics": {"score": NaN}}\n' >"$metrics" ;;
  missing) printf '{"version": 1, "metrics": {"other": 1}}\n' >"$metrics" ;;
  garbage) echo 'this is not JSON' >"$metrics" ;;
  sleep) exec sleep 60 ;;
  crash) exit 3 ;;
  fifo) rm -f "$metrics"; mkfifo "$metrics" ;;
  inf) printf '{"version": 1, "metrics": {"score": 1e309}}\n' >"$metrics" ;;
  setsid:*)
    setsid bash -c "exec -a stray-$STRAY_TAG sleep 300" </dev/null >/dev/null 2>&1 &
    printf '{"version": 1, "metrics": {"score": %s}}\n' "${mode#setsid:}" >"$metrics" ;;
  huge:*)
    head -c 3145728 /dev/zero | tr '\0' x
    printf '{"version": 1, "metrics": {"score": %s}}\n' "${mode#huge:}" >"$metrics" ;;
  *) echo "fake_eval.sh: unknown mode '$mode'" >&2; exit 2 ;;
esac
