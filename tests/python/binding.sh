# tests/python/binding.sh: the Python binding (python/ftl) over the build's libftl.so, under
# `ftl run -n 2`: numpy arrays saved and restored bit-exactly (tests/python/ckpt_numpy.py).
. "$(dirname "$0")/../launcher/lib.sh" || exit 1
export PYTHONDONTWRITEBYTECODE=1  # keep the source tree clean
/usr/bin/python3 -c 'import numpy' 2>/dev/null || { echo "SKIP: python3-numpy is not installed"; exit 77; }
run_ftl out run -n 2 --run-dir rd -- /usr/bin/python3 "$FTL_SOURCE_DIR/tests/python/ckpt_numpy.py"
expect_rc 0 out
for r in 0 1; do
  expect_contains rd/attempt-0000/rank-0000$r.out "binding ok rank $r"
done
# Committed, and `ftl ckpt verify` (the C side) agrees with what the binding wrote.
ftl ckpt verify rd 5 >verify.out 2>&1 || { cat verify.out >&2; fail "ftl ckpt verify rd 5 failed"; }
echo ok
