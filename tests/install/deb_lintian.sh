# tests/install/deb_lintian.sh BUILD: makes the Debian packages of the build (scripts/build-deb.sh),
# fails on any lintian error or warning (overrides: packaging/lintian-overrides), then unpacks every
# package into one scratch root (dpkg -x) and uses it as a user would: the root's `ftl version`,
# tests/install/prog.c built against the root with pkg-config and with find_package(ftl) and run
# under the root's `ftl run -n 2`, and the root's Python binding finding the root's library and
# naming its license. Then as on a CPU node: no packaged ELF file NEEDs the CUDA runtime or NCCL,
# and with every CUDA folder hidden (a mount namespace: tmpfs over /usr/local/cuda* and /usr/local/lib,
# /dev/null over any other copy of libcudart or libnccl) the same `ftl version`, `ftl run -n 2` of
# prog.c and `import ftl` work. Skipped (77) without lintian or dpkg-deb, or (after every other
# check) when no mount namespace can be made to hide CUDA in.
. "$(dirname "$0")/../launcher/lib.sh" || exit 1
. "$(dirname "$0")/lib.sh" || exit 1
BUILD=$1
HERE=$FTL_SOURCE_DIR/tests/install
for tool in lintian dpkg-deb; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is missing (scripts/setup-deps.sh installs it)"; exit 77; }
done

bash "$FTL_SOURCE_DIR/scripts/build-deb.sh" "$BUILD" "$SCRATCH/debs" >build-deb.log 2>&1 ||
  { cat build-deb.log >&2; fail "scripts/build-deb.sh failed"; }
cat build-deb.log
for p in libftl0 libftl-dev ftl python3-ftl libftl0-dbgsym ftl-dbgsym; do
  ls "$SCRATCH"/debs/"${p}"_*.deb >/dev/null 2>&1 || fail "no package $p"
done

# lintian: 0 when it found no error, 1 when it did, anything else when it could not check.
allow_root=()
[ "$(id -u)" = 0 ] && allow_root=(--allow-root)
lintian "${allow_root[@]}" --tag-display-limit 0 "$SCRATCH"/debs/*.deb >lintian.txt 2>&1
lrc=$?
cat lintian.txt
errors=$(grep -c '^E: ' lintian.txt)
warnings=$(grep -c '^W: ' lintian.txt)
echo "lintian: $errors error(s), $warnings warning(s) in $(ls "$SCRATCH"/debs/*.deb | wc -l) packages"
[ "$errors" -eq 0 ] || fail "lintian reports $errors error(s)"
[ "$warnings" -eq 0 ] || fail "lintian reports $warnings warning(s) (an override, with why, goes in packaging/lintian-overrides)"
[ "$lrc" -eq 0 ] || fail "lintian exited $lrc"

# One root with every package, as `dpkg -i` would leave /usr.
R=$SCRATCH/root
for deb in "$SCRATCH"/debs/*.deb; do
  dpkg -x "$deb" "$R" || fail "dpkg -x $deb failed"
done
LIBDIR=$R/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)
[ -f "$LIBDIR/libftl.so.0" ] || fail "no libftl.so.0 in $LIBDIR"
export LD_LIBRARY_PATH=$LIBDIR
"$R/usr/bin/ftl" version >version.out 2>&1
RC=$?
expect_rc 0 version.out
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD/CMakeCache.txt")
expect_contains version.out "ftl $version"
# The stripped library's debug symbols are where gdb looks for them, by build id.
id=$(LC_ALL=C readelf -n "$LIBDIR/libftl.so.0" | sed -n 's/^ *Build ID: *//p')
[ -f "$R/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug" ] || fail "no debug symbols for libftl.so.0 (build id $id)"
if grep -n '/usr/local\|-L/' "$LIBDIR/pkgconfig/ftl.pc"; then fail "ftl.pc names a folder of the build machine"; fi

# prog.c against the root: pkg-config (the .pc is relocatable) and find_package(ftl).
export PKG_CONFIG_PATH=$LIBDIR/pkgconfig
[ "$(readlink -f "$(pkg-config --variable=libdir ftl)")" = "$(readlink -f "$LIBDIR")" ] ||
  fail "pkg-config's libdir is $(pkg-config --variable=libdir ftl), not $LIBDIR"
# shellcheck disable=SC2046
cc -std=c17 -Wall -Werror "$HERE/prog.c" -o prog-pc $(pkg-config --cflags --libs ftl) 2>cc.log ||
  { cat cc.log >&2; fail "prog.c did not build with pkg-config against the packages"; }
build_with_find_package "$R/usr"
for prog in ./prog-pc ./cm/build/prog-cmake; do
  name=$(basename "$prog")
  # Without an rpath: the library comes from LD_LIBRARY_PATH, the root's multiarch folder.
  ldd "$prog" | grep -q "$LIBDIR/libftl.so.0" || { ldd "$prog" >&2; fail "$name does not load the packaged libftl.so.0"; }
  expect_prog_runs "$R/usr/bin/ftl" "$prog"
done

# python3-ftl finds libftl0's library by the path it recorded.
got=$(cd / && env -u FTL_BIN_DIR -u FTL_LIBRARY PYTHONPATH="$R/usr/lib/python3/dist-packages" /usr/bin/python3 -c \
  'import ftl; print(ftl.library_path())') || fail "the packaged Python binding does not import"
[ "$(readlink -f "$got")" = "$(readlink -f "$LIBDIR/libftl.so.0")" ] || fail "the packaged binding loads $got, not $LIBDIR/libftl.so.0"
lic=$(cd / && PYTHONPATH="$R/usr/lib/python3/dist-packages" /usr/bin/python3 -c \
  'import importlib.metadata as m; d = m.distribution("ftl"); print(d.version, d.metadata["License-Expression"])') ||
  fail "the packaged binding has no distribution metadata"
[ "$lic" = "$version Apache-2.0" ] || fail "the packaged binding's metadata says '$lic', not '$version Apache-2.0'"
grep -q '^License: Apache-2.0$' "$R/usr/share/doc/libftl0/copyright" || fail "libftl0's copyright file does not name Apache-2.0"

# A CPU node: nothing packaged links the CUDA runtime or NCCL (they are dlopened where present).
while IFS= read -r -d '' f; do
  readelf -h "$f" >/dev/null 2>&1 || continue
  if readelf -d "$f" | grep -E 'NEEDED.*\[lib(cudart|nccl|cuda)\.so'; then fail "$f links the CUDA runtime or NCCL"; fi
done < <(find "$R/usr/bin" "$LIBDIR" -type f -print0)

# Then the packaged files used with CUDA hidden. hide-cuda.sh, run in a private mount namespace,
# covers every folder and file that holds a CUDA runtime or NCCL, proves they are gone (a dlopen
# of each fails) and runs its arguments.
cat >hide-cuda.sh <<'HIDE'
set -e
for d in /usr/local/cuda* /usr/local/lib; do
  [ -d "$d" ] && [ ! -L "$d" ] && mount -t tmpfs -o size=1m,mode=0755 ftl-no-cuda "$d"
done
# Copies elsewhere (a CUDA or NCCL from Debian packages, in the multiarch folder): the files.
for f in $(ldconfig -p | sed -n 's/^[[:space:]]*lib\(cudart\|nccl\|cuda\)\.so[^ ]* .*=> //p' | sort -u); do
  [ -e "$f" ] && mount --bind /dev/null "$(readlink -f "$f")"
done
python3 -c '
import ctypes, sys
for name in ("libcudart.so.13", "libcudart.so.12", "libnccl.so.2", "libcudart.so", "libnccl.so"):
    try:
        ctypes.CDLL(name)
    except OSError:
        continue
    sys.exit("hide-cuda: %s still loads" % name)
'
exec "$@"
HIDE
hide=""
for how in "unshare -m --propagation private" "unshare -r -m --propagation private"; do
  if $how sh -c 'mount -t tmpfs ftl-probe /mnt' 2>/dev/null; then hide=$how; break; fi
done
if [ -z "$hide" ]; then
  echo "ok: $errors lintian errors, $warnings warnings; the packages load with CUDA present"
  echo "SKIP: no mount namespace here (unshare -m) to hide CUDA in: the load without CUDA was not checked"
  exit 77
fi
$hide bash hide-cuda.sh "$R/usr/bin/ftl" version >nocuda-version.out 2>&1
RC=$?
expect_rc 0 nocuda-version.out
expect_contains nocuda-version.out "ftl $version"
# A build with the CUDA paths says the runtime is missing, rather than failing to start.
if grep -q '^  CUDA:  ON' version.out; then expect_contains nocuda-version.out "no CUDA runtime (libcudart.so."; fi
$hide bash hide-cuda.sh "$R/usr/bin/ftl" run -n 2 --run-dir rd-nocuda -- ./prog-pc >nocuda-run.out 2>&1
RC=$?
expect_rc 0 nocuda-run.out
for r in 0 1; do
  expect_contains "rd-nocuda/attempt-0000/rank-0000$r.out" "prog ok rank $r of 2, sum 3, restored step 1"
done
(cd / && $hide env -u FTL_BIN_DIR -u FTL_LIBRARY PYTHONPATH="$R/usr/lib/python3/dist-packages" \
  bash "$SCRATCH/hide-cuda.sh" /usr/bin/python3 -c 'import ftl; print("import ftl:", ftl.library_path(), ftl.split_rows(10, 1, 2))') \
  >nocuda-python.out 2>&1
RC=$?
expect_rc 0 nocuda-python.out
expect_contains nocuda-python.out "libftl.so.0 (5, 5)"
echo "ok: $errors lintian errors, $warnings warnings; the packaged library, ftl and import ftl load with CUDA hidden"
