# tests/install/install_test.sh BUILD PYTHON_DIR CFLAGS: installs the build into a scratch prefix,
# builds tests/install/prog.c outside the tree against the installed files, once with pkg-config
# and once with find_package(ftl), runs each under the installed `ftl run -n 2`, checks that
# libftl.so exports only the public API and that the installed Python binding finds the installed
# library. prog.c also writes and reads its final adapter through the installed door, and the
# example's adapter code compiles against the installed headers.
. "$(dirname "$0")/../launcher/lib.sh" || exit 1
. "$(dirname "$0")/lib.sh" || exit 1
BUILD=$1 PYDIR=${2:-} CFLAGS_EXTRA=${3:-}
HERE=$FTL_SOURCE_DIR/tests/install
# In a sanitizer build, the programs built here lack the tree's dlclose shim
# (core/sanitizer_keep_plugins.c), so Open MPI's plugins are unmapped before the leak check: their
# init-time allocations are matched by tests/lsan.supp only through the libraries below them, which
# the slow unwinder reaches (the fast one stops at the unmapped plugin).
case " $CFLAGS_EXTRA " in *-fsanitize=*address*) export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0" ;; esac
P=$SCRATCH/prefix
cmake --install "$BUILD" --prefix "$P" >install.log 2>&1 || { cat install.log >&2; fail "cmake --install failed"; }
LIB=$(ls "$P"/lib*/libftl.so 2>/dev/null || ls "$P"/lib/*/libftl.so)
[ -f "$LIB" ] || fail "no libftl.so under $P"
LIBDIR=$(dirname "$LIB")
for f in "$P/bin/ftl" "$P/libexec/ftl/ftl-rank-agent" "$LIBDIR/libftl.a" "$LIBDIR/pkgconfig/ftl.pc" "$LIBDIR/cmake/ftl/ftlConfig.cmake" \
         "$P/include/ftl/ftl.h" "$P/include/ftl/export.h" "$P/share/doc/ftl/checkpoint.md" "$P/share/doc/ftl/LICENSE"; do
  [ -e "$f" ] || fail "not installed: $f"
done
# A versioned soname from the project version.
objdump -p "$LIB" | grep -q 'SONAME *libftl\.so\.[0-9]' || fail "libftl.so has no versioned soname"

# Only the public API leaves the library: every exported symbol is declared in include/ftl/.
grep -ho '\bftl_[a-z0-9_]*\b' "$P"/include/ftl/*.h | sort -u >public.txt
# (An ASan build adds an ODR indicator, __odr_asan.NAME, for each exported global: not API.)
nm -D --defined-only "$LIB" | awk '{print $3}' | grep -v '^__odr_asan\.ftl_' | sort -u >exported.txt
grep -qx ftl_init exported.txt && grep -qx ftl_ckpt_save exported.txt || fail "libftl.so does not export ftl_init/ftl_ckpt_save"
comm -23 exported.txt public.txt >extra.txt
[ -s extra.txt ] && { head -20 extra.txt >&2; fail "libftl.so exports $(wc -l <extra.txt) symbols that are not public API"; }

# Every public function is marked FTL_API (unmarked, it would be hidden from libftl.so).
grep -nE '^[A-Za-z_][A-Za-z0-9_ ]*[ *]ftl_[a-z0-9_]+\(' "$P"/include/ftl/*.h | grep -vE ':(FTL_API|typedef|#)' >unmarked.txt
[ -s unmarked.txt ] && { cat unmarked.txt >&2; fail "public declarations without FTL_API (include/ftl/export.h)"; }

# 1. pkg-config.
export PKG_CONFIG_PATH=$LIBDIR/pkgconfig
# shellcheck disable=SC2086,SC2046
cc -std=c17 -Wall -Werror $CFLAGS_EXTRA "$HERE/prog.c" -o prog-pc $(pkg-config --cflags --libs ftl) \
  -Wl,-rpath,"$LIBDIR" 2>cc.log || { cat cc.log >&2; fail "prog.c did not build with pkg-config"; }
# The example fine-tune's adapter code uses only public headers (ftl/adapter.h): it compiles
# against the installed ones, with the repository root not on the include path.
# shellcheck disable=SC2086,SC2046
cc -std=c17 -Wall -Werror $CFLAGS_EXTRA -c "$FTL_SOURCE_DIR/examples/finetune/adapter_io.c" -o adapter_io.o \
  -I"$FTL_SOURCE_DIR/examples/finetune" $(pkg-config --cflags ftl) 2>cc-adapter.log ||
  { cat cc-adapter.log >&2; fail "examples/finetune/adapter_io.c did not build against the installed headers"; }
# 2. find_package(ftl).
build_with_find_package "$P" "$CFLAGS_EXTRA"

for prog in ./prog-pc ./cm/build/prog-cmake; do
  name=$(basename "$prog")
  expect_prog_runs "$P/bin/ftl" "$prog"
  for f in adapter.safetensors adapter.json COMMIT; do
    [ -s "rd-$name/final/$f" ] || fail "$name: no final/$f written through the installed door"
  done
done

# The installed Python binding finds the installed library (by its recorded relative path).
if [ -n "$PYDIR" ]; then
  got=$(cd / && env -u FTL_BIN_DIR -u FTL_LIBRARY PYTHONPATH="$P/$PYDIR" /usr/bin/python3 -c 'import ftl; print(ftl.library_path())') ||
    fail "the installed Python binding does not import"
  [ "$(readlink -f "$got")" = "$(readlink -f "$LIBDIR/libftl.so.0")" ] || fail "the installed binding loads $got, not $LIBDIR/libftl.so.0"
  # Its distribution metadata: what pip and importlib.metadata read (name, version, license).
  lic=$(cd / && PYTHONPATH="$P/$PYDIR" /usr/bin/python3 -c \
    'import importlib.metadata as m; d = m.distribution("ftl"); print(d.version, d.metadata["License-Expression"])') ||
    fail "the installed binding has no distribution metadata"
  version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD/CMakeCache.txt")
  [ "$lic" = "$version Apache-2.0" ] || fail "the installed binding's metadata says '$lic', not '$version Apache-2.0'"
fi
echo "ok"
