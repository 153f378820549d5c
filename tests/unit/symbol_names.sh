# tests/unit/symbol_names.sh BUILD_DIR: the naming rule of docs/architecture.md ("Names"), checked on
# the compiled objects of the library's modules rather than on the source, so a macro or a
# generated name cannot slip past:
#   - a global symbol named ftl_* is public: it is declared in include/ftl/;
#   - every other global symbol carries its module's prefix (core_, ln_, rz_, ck_, cd_, pl_, ev_),
#     the folder it is compiled from deciding which;
#   - exempt: the ftl and ftl-rank-agent programs' main(), the dlclose() that core/sanitizer_keep_plugins.c puts in
#     front of libc's in sanitizer builds, and names the compiler makes (reserved: "__" first,
#     such as ASan's __odr_asan.*).
# Tests, benchmarks and examples are not the library and are not checked.
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:?usage: symbol_names.sh BUILD_DIR}
command -v nm >/dev/null || { echo "skip: no nm" >&2; exit 77; }
public=$(cat "$SRC"/include/ftl/*.h | grep -oE '\bftl_[A-Za-z0-9_]+' | sort -u)
prefix_of() {
  case $1 in
    core) echo core_ ;; launcher) echo ln_ ;; rendezvous) echo rz_ ;; checkpoint) echo ck_ ;;
    cadence) echo cd_ ;; pipeline) echo pl_ ;; eval) echo ev_ ;; *) echo "" ;;
  esac
}
bad=0 checked=0
for module in core launcher rendezvous checkpoint cadence pipeline eval; do
  want=$(prefix_of "$module")
  while read -r obj sym; do
    src=${obj#"$BUILD/$module/CMakeFiles/"}
    src="$module/${src#*/}"
    src=${src%.o}
    [ -e "$SRC/$src" ] || continue # an object left by a removed source file (an older build folder)
    checked=$((checked + 1))
    case $sym in
      main) { [ "$src" = launcher/main.c ] || [ "$src" = launcher/agent_main.c ]; } && continue ;;
      dlclose) [ "$src" = core/sanitizer_keep_plugins.c ] && continue ;;
      __*) continue ;;
      ftl_*) grep -qx "$sym" <<<"$public" && continue
             echo "FAIL: $sym ($src) has the public prefix ftl_ but is not declared in include/ftl/: name it $want${sym#ftl_}" >&2
             bad=$((bad + 1)); continue ;;
      "$want"*) continue ;;
    esac
    echo "FAIL: $sym ($src) is a global symbol of $module/ without its prefix $want (or make it static)" >&2
    bad=$((bad + 1))
  done < <(find "$BUILD/$module" -path '*/CMakeFiles/*.dir/*.o' -print0 2>/dev/null |
             xargs -0 -r nm -A --defined-only -g 2>/dev/null |
             awk '$2 ~ /^[TDBRVWGS]$/ { sub(/:[0-9a-f]*$/, "", $1); print $1, $3 }')
done
# Not vacuous: the library defines hundreds of global symbols.
[ "$checked" -ge 100 ] || { echo "FAIL: only $checked symbols found under $BUILD: is it a build tree?" >&2; exit 1; }
[ "$bad" -eq 0 ] || { echo "FAIL: $bad of $checked global symbols break the naming rule" >&2; exit 1; }
echo "ok: $checked global symbols follow the naming rule"
