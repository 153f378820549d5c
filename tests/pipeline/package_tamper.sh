# Tampered packages, made with Python's tarfile and the zstd command (tamper.py): each is refused
# by the reader with a message naming the problem, in verify-only mode and when unpacking; the
# target folder never appears, no temporary folder is left, and nothing is written anywhere else.
. "$FTL_SOURCE_DIR/tests/pipeline/lib.sh" || exit 1
PY=
for p in /usr/bin/python3 python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import tarfile' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] && command -v zstd >/dev/null || { echo "skipped: needs python3 and zstd (Debian: zstd)"; exit 77; }
id=$(make_package good.tar.zst one) || fail "package failed"
pipeline_tool unpack good.tar.zst - >/dev/null || fail "the good package is refused"
mkdir out
ABS="$SCRATCH/absolute-escape.txt"

# refused KIND EXPECTED [MAX_TOTAL]
refused() {
  local kind=$1 want=$2 max=${3:-}
  "$PY" "$FTL_SOURCE_DIR/tests/pipeline/tamper.py" good.tar.zst "$kind" "bad-$kind.tar.zst" "$ABS" ||
    fail "tamper.py $kind failed"
  local before after
  before=$(cd "$SCRATCH" && find . | LC_ALL=C sort)
  pipeline_tool unpack "bad-$kind.tar.zst" - $max >verify.out 2>&1 && fail "$kind: accepted in verify-only mode"
  expect_contains verify.out "$want"
  pipeline_tool unpack "bad-$kind.tar.zst" out/target $max >unpack.out 2>&1 && fail "$kind: unpacked"
  expect_contains unpack.out "$want"
  [ -e out/target ] && fail "$kind: out/target exists after a refusal"
  after=$(cd "$SCRATCH" && find . | LC_ALL=C sort | grep -v -e '^./verify.out$' -e '^./unpack.out$')
  before=$(printf '%s\n' "$before" | grep -v -e '^./verify.out$' -e '^./unpack.out$')
  [ "$before" = "$after" ] || { diff <(echo "$before") <(echo "$after") >&2; fail "$kind: files appeared or vanished"; }
  [ -e "$ABS" ] && fail "$kind: wrote $ABS"
  echo "refused $kind: $(tail -1 unpack.out)"
}

refused flip "SHA-256"
refused extra "beyond the 4 files"
refused dotdot "'..'"
refused absolute "absolute"
refused symlink "symbolic link"
refused hardlink "hard link"
refused fifo "FIFO"
refused oversized "declares"
refused bomb "declares"
refused bomb_declared "takes the package over" 67108864
refused notfirst "where \"MANIFEST.json\" was expected"
# A cut-short package and random bytes.
head -c $(($(stat -c %s good.tar.zst) / 2)) good.tar.zst >cut.tar.zst
pipeline_tool unpack cut.tar.zst out/target >cut.out 2>&1 && fail "a cut package was accepted"
[ -e out/target ] && fail "out/target exists"
head -c 4096 /dev/urandom >noise.tar.zst
pipeline_tool unpack noise.tar.zst out/target >noise.out 2>&1 && fail "random bytes were accepted"
# The good one still unpacks, and only into its target.
pipeline_tool unpack good.tar.zst out/target >/dev/null || fail "the good package is refused"
[ "$(ls out/target | tr '\n' ' ')" = "MANIFEST.json adapter_config.json adapter_model.safetensors provenance.json verdict.json " ] ||
  fail "unexpected files: $(ls out/target)"
[ "$(ls out)" = "target" ] || fail "leftovers in out/: $(ls out)"
echo ok
