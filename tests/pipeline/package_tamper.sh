# Tampered packages, made with Python's tarfile and the zstd command (tamper.py): each is refused
# by the reader with a message naming the problem, in verify-only mode, when unpacking and when
# canonicalizing (taking a package in), and by `ftl registry publish --unverified`; the target
# folder never appears, no temporary folder or file is left, and nothing is written anywhere else.
# The same entries in other packaging (the tar over several zstd frames, setuid modes, foreign
# owners...) are accepted, and canonicalized back to exactly the bytes of the good package: none
# of the extra survives. An untampered package canonicalizes to itself, byte for byte.
. "$FTL_SOURCE_DIR/tests/pipeline/lib.sh" || exit 1
PY=
for p in /usr/bin/python3 python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import tarfile' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] && command -v zstd >/dev/null || { echo "skipped: needs python3 and zstd (Debian: zstd)"; exit 77; }
id=$(make_package good.tar.zst one) || fail "package failed"
pipeline_tool unpack good.tar.zst - >/dev/null || fail "the good package is refused"
[ "$(pipeline_tool canonicalize good.tar.zst good-canon.tar.zst)" = "$id identical $(stat -c %s good.tar.zst) $(stat -c %s good.tar.zst)" ] ||
  fail "the good package does not canonicalize to itself"
cmp good.tar.zst good-canon.tar.zst || fail "the canonical bytes of the good package differ from it"
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
  pipeline_tool canonicalize "bad-$kind.tar.zst" out/canon.tar.zst - $max >canon.out 2>&1 && fail "$kind: canonicalized"
  expect_contains canon.out "$want"
  [ -e out/canon.tar.zst ] && fail "$kind: out/canon.tar.zst exists after a refusal"
  after=$(cd "$SCRATCH" && find . | LC_ALL=C sort | grep -v -e '^./verify.out$' -e '^./unpack.out$' -e '^./canon.out$')
  before=$(printf '%s\n' "$before" | grep -v -e '^./verify.out$' -e '^./unpack.out$' -e '^./canon.out$')
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
# What libarchive reads past without a word (archive_seam.h): refused, not normalised.
refused nulpath "pax path record holds a NUL byte"
refused noend "without the two zero blocks that end a tar"
refused onezero "ends with one zero block, not the two"
refused zstd2 "zstd inside zstd"
refused tar2 "data after the end of the archive"
refused frame2_tar "data after the end of the archive"
# Issue 32: what is no packaging noise but a second meaning (or a hidden payload) is refused too.
refused global "is a pax global header"
refused skippable "zstd skippable frame at offset"
refused skippable_first "zstd skippable frame at offset 0 "
refused trailing "after its last zstd frame, is not a zstd frame"
refused casefold "declares \"ADAPTER_CONFIG.json\" and \"adapter_config.json\", which differ only by case"

# normalised KIND: the same entries, other bytes; accepted under the same id, and taken in as
# exactly the good package's bytes.
normalised() {
  local kind=$1
  "$PY" "$FTL_SOURCE_DIR/tests/pipeline/tamper.py" good.tar.zst "$kind" "odd-$kind.tar.zst" ||
    fail "tamper.py $kind failed"
  cmp -s good.tar.zst "odd-$kind.tar.zst" && fail "$kind: tamper.py changed nothing"
  [ "$(pipeline_tool unpack "odd-$kind.tar.zst" -)" = "$id" ] || fail "$kind: not read under the good id"
  local got
  got=$(pipeline_tool canonicalize "odd-$kind.tar.zst" "canon-$kind.tar.zst") || fail "$kind: canonicalize failed"
  [ "$got" = "$id rewritten $(stat -c %s "odd-$kind.tar.zst") $(stat -c %s good.tar.zst)" ] ||
    fail "$kind: canonicalize said '$got'"
  cmp good.tar.zst "canon-$kind.tar.zst" || fail "$kind: the canonical bytes are not the good package's"
  ls | grep -q '\.tmp-' && fail "$kind: a temporary file was left: $(ls)"
  echo "normalised $kind: $(stat -c %s "odd-$kind.tar.zst") bytes offered, the good $(stat -c %s good.tar.zst) stored"
}
normalised frame2_zeros
normalised split
normalised setuid
normalised owner

# canonicalize checks the expected id; a FIFO or a folder offered as a package is refused at once
# (never waited on).
pipeline_tool canonicalize good.tar.zst out/canon.tar.zst 0000000000000000000000000000000000000000000000000000000000000000 \
  >canon.out 2>&1 && fail "a wrong expected id was accepted"
expect_contains canon.out "not the expected"
[ -e out/canon.tar.zst ] && fail "out/canon.tar.zst exists after a refusal"
mkfifo fifo.tar.zst
timeout 20 pipeline_tool unpack fifo.tar.zst - >fifo.out 2>&1 && fail "a FIFO was accepted"
expect_contains fifo.out "not a regular file"
timeout 20 pipeline_tool canonicalize fifo.tar.zst out/canon.tar.zst >fifo.out 2>&1 && fail "a FIFO was canonicalized"
expect_contains fifo.out "not a regular file"
timeout 20 pipeline_tool unpack out - >fifo.out 2>&1 && fail "a folder was accepted"
expect_contains fifo.out "not a regular file"
[ "$(ls out)" = "" ] || fail "leftovers in out/: $(ls out)"
# A cut-short package and random bytes.
head -c $(($(stat -c %s good.tar.zst) / 2)) good.tar.zst >cut.tar.zst
pipeline_tool unpack cut.tar.zst out/target >cut.out 2>&1 && fail "a cut package was accepted"
[ -e out/target ] && fail "out/target exists"
head -c 4096 /dev/urandom >noise.tar.zst
pipeline_tool unpack noise.tar.zst out/target >noise.out 2>&1 && fail "random bytes were accepted"
# Taken into a registry, an oddly packaged form is stored as ftl's own bytes: the stored package
# is the good package, byte for byte, under the same version (ftl registry publish).
REG=$SCRATCH/reg
for kind in setuid owner split; do
  ftl registry publish --registry "$REG" tampered "odd-$kind.tar.zst" --unverified >pub-$kind.out 2>&1 ||
    { cat pub-$kind.out >&2; fail "$kind: registry publish refused a normalisable package"; }
  cmp good.tar.zst "$REG/tampered/versions/$id/package.tar.zst" ||
    fail "$kind: the registry stored the offered bytes, not ftl's canonical ones"
done
[ "$(ls "$REG/tampered/versions")" = "$id" ] || fail "several versions for one adapter: $(ls "$REG/tampered/versions")"
# --unverified skips the gate's signature, not the package's checks.
for kind in casefold global skippable trailing; do
  ftl registry publish --registry "$REG" tampered "bad-$kind.tar.zst" --unverified >pub-$kind.out 2>&1 &&
    fail "$kind: registry publish --unverified took it"
  expect_contains pub-$kind.out "refused"
done
[ "$(ls "$REG/tampered/versions")" = "$id" ] || fail "a refused package left a version: $(ls "$REG/tampered/versions")"

# The good one still unpacks, and only into its target.
pipeline_tool unpack good.tar.zst out/target >/dev/null || fail "the good package is refused"
[ "$(ls out/target | tr '\n' ' ')" = "MANIFEST.json adapter_config.json adapter_model.safetensors provenance.json verdict.json " ] ||
  fail "unexpected files: $(ls out/target)"
[ "$(ls out)" = "target" ] || fail "leftovers in out/: $(ls out)"
echo ok
