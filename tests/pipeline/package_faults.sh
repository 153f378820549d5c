# The file seam's faults reach packages (pipeline/package.c through core/fs.h): unpacking a package
# (pipeline_tool unpack, `ftl registry fetch`) and building one (pipeline_tool package) with
# FTL_FAULT failing the Nth write (ENOSPC) or the Nth fsync (EIO), for every N the command reaches.
# After each failure the error names the file and says what happened, the target is whole or absent
# (a package is unpacked into a new folder, whole or not at all; a package file appears whole or
# not at all: only a failed fsync of the folder after the rename leaves it, complete), no temporary
# is left, and a run whose fault lies beyond its last call gives the same bytes. Then a crash inside
# an unpack (FTL_CRASH_AT=package.unpack.write, after the manifest, before the files) leaves no
# target, and the retry works.
. "$FTL_SOURCE_DIR/tests/pipeline/lib.sh" || exit 1
v1=$(make_package p1.tar.zst one)
pipeline_tool unpack p1.tar.zst good >/dev/null || fail "set-up unpack"
HAVE_FTL_REGISTRY=0
if ftl registry help >/dev/null 2>&1; then
  HAVE_FTL_REGISTRY=1
  REG=$SCRATCH/registry
  pipeline_tool publish "$REG" chat p1.tar.zst prod >/dev/null || fail "set-up publish"
fi

# no_leftovers WHAT: nothing named *.tmp* in the scratch folder's top level.
no_leftovers() {
  if [ -n "$(find . -maxdepth 1 -name '*.tmp*')" ]; then
    ls -la >&2
    fail "$1: a temporary was left"
  fi
}

# The sweep's three steps (fault_sweep, tests/pipeline/lib.sh) for CMD: unpack, fetch or build.
fault_try() {
  rm -rf out out.tar.zst
  case $1 in
  unpack) FTL_FAULT=$2 pipeline_tool unpack p1.tar.zst out >/dev/null 2>err ;;
  fetch) FTL_FAULT=$2 ftl registry fetch --registry "$REG" chat@prod out >/dev/null 2>err ;;
  build) FTL_FAULT=$2 pipeline_tool package export verdict.json out.tar.zst one >/dev/null 2>err ;;
  esac
}

fault_done() {
  if [ "$1" = build ]; then
    cmp -s out.tar.zst p1.tar.zst || fail "$1 $2: success, but the package differs"
  else
    diff -r out good >/dev/null || fail "$1 $2: success, but the unpacked files differ"
  fi
}

fault_failed() {
  local cmd=$1 fs=$2 want=$3
  grep -qF "$want" err || { cat err >&2; fail "$cmd $fs: the error does not say '$want'"; }
  case $cmd in
  build) grep -qF "out.tar.zst" err || { cat err >&2; fail "$cmd $fs: the error does not name the package"; }
    # Only the fsync of the folder after the rename can leave the file, whole.
    [ -e out.tar.zst ] && ! cmp -s out.tar.zst p1.tar.zst && fail "$cmd $fs: a partial package file exists" ;;
  *) grep -qE "out|MANIFEST.json|adapter_|provenance.json|verdict.json" err ||
    { cat err >&2; fail "$cmd $fs: the error names no file"; }
    # Only the fsync of the parent folder after the rename can leave the target, whole.
    [ -e out ] && ! diff -r out good >/dev/null && fail "$cmd $fs: a partial target exists after a failed unpack" ;;
  esac
  no_leftovers "$cmd $fs"
}

# faults CMD SPEC WANT_TEXT: CMD under FTL_FAULT=SPEC with N = 1, 2, ... until a run succeeds.
faults() { fault_sweep 60 "$@"; }

faults unpack write:N:ENOSPC "No space left on device"
faults unpack fsync:N:EIO "fsync"
faults build write:N:ENOSPC "No space left on device"
faults build fsync:N:EIO "fsync"
if [ $HAVE_FTL_REGISTRY = 1 ]; then
  faults fetch write:N:ENOSPC "No space left on device"
  faults fetch fsync:N:EIO "fsync"
fi

# A crash in the middle of an unpack.
rm -rf out
FTL_CRASH_AT=package.unpack.write pipeline_tool unpack p1.tar.zst out >crash.out 2>&1
rc=$?
[ $rc -eq 137 ] || { cat crash.out >&2; fail "package.unpack.write: expected a SIGKILL (137), got $rc"; }
[ -e out ] && fail "package.unpack.write: the target exists after a crash"
rm -rf out.tmp-* # what a killed unpacker leaves (the registry reaps its own under its lock)
pipeline_tool unpack p1.tar.zst out >/dev/null || fail "package.unpack.write: the retry failed"
diff -r out good >/dev/null || fail "package.unpack.write: the retry's files differ"
echo ok
