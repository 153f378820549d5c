#!/usr/bin/env bash
# scripts/house-metrics.sh [DIR]: the numbers the house keeps in check in the library folders (core,
# launcher, rendezvous, checkpoint, cadence, pipeline, eval) of the checkout at DIR (default: this
# one), as docs/architecture.md ("Size") states the rules: the longest functions (none over 120
# lines), files over 800 lines (each with a reason in its top comment) and over 400 without a map
# in their top comment, raw durable system calls outside core (not through core's file seam),
# getenv calls, internal types still named ftl_*, and duplicate pairs (the `duplicates` tool, where
# it is installed). Needs universal-ctags. Prints; the limits are checked by tests/unit/house_limits.sh.
# The rules: docs/architecture.md, "Size".
set -euo pipefail
dir=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$dir"
folders=(core launcher rendezvous checkpoint cadence pipeline eval)
command -v ctags >/dev/null || { echo "house-metrics: needs universal-ctags (ctags)" >&2; exit 2; }
sources=()
for d in "${folders[@]}"; do for f in "$d"/*.c "$d"/*.h; do [ -f "$f" ] && sources+=("$f"); done; done
c_sources=()
for f in "${sources[@]}"; do [[ $f == *.c ]] && c_sources+=("$f"); done

# NAME FILE:LINE LENGTH of every function, from ctags' start and end lines.
functions() {
  ctags --languages=C --kinds-C=f --fields=+ne --output-format=u-ctags -o - "${c_sources[@]}" 2>/dev/null |
    awk -F'\t' '{ l = e = 0; for (i = 4; i <= NF; i++) { if ($i ~ /^line:/) l = substr($i, 6); if ($i ~ /^end:/) e = substr($i, 5) }
                 if (e) printf "%d %s:%d %s\n", e - l + 1, $2, l, $1 }' | sort -rn
}
echo "== the longest functions (the limit: 120 lines)"
functions | awk '$1 > 120 || NR <= 3'
echo "== files over 800 lines (\"why one file\": their top comment says why)"
for f in "${sources[@]}"; do
  n=$(wc -l <"$f")
  [ "$n" -le 800 ] && continue
  if awk '{ print } /\*\// { exit }' "$f" | grep -q '^ \* Why one file'; then echo "$n $f (why one file)"; else echo "$n $f"; fi
done | sort -rn
echo "== files over 400 lines without a map (a 'Map' line or a numbered list in the top comment)"
for f in "${sources[@]}"; do
  n=$(wc -l <"$f")
  [ "$n" -gt 400 ] || continue
  awk '{ print } /\*\// { exit }' "$f" | grep -qE '^ \* *Map\b|^ \* +[0-9]+\. ' || echo "$n $f"
done | sort -rn
echo "== raw durable calls outside core (the file seam is core_fs_table)"
raw='(^|[^._>a-z0-9])(rename|renameat|unlink|unlinkat|rmdir|mkdir|mkdirat|fsync|fdatasync|chmod|fchmod|fallocate|posix_fallocate|ftruncate|symlink|symlinkat|linkat)\('
for f in "${c_sources[@]}"; do
  [[ $f == core/* ]] && continue
  # code only: comments and string literals dropped first
  sed -E 's://.*$::; s:/\*.*\*/::g; s:"([^"\\]|\\.)*":"":g' "$f" | grep -nE "$raw" | sed "s|^|$f:|" || true
done
echo "== getenv calls"
grep -c 'getenv(' "${c_sources[@]}" | grep -v ':0$' | sort -t: -k2 -rn | tr '\n' ' '
echo
echo "total: $(cat "${c_sources[@]}" | grep -o 'getenv(' | wc -l)"
echo "== internal types named ftl_* (outside include/)"
{ grep -hoE '^\} *ftl_[a-z0-9_]+;|^typedef [^;(]*\bftl_[a-z0-9_]+;' "${sources[@]}" || true; } |
  { grep -oE 'ftl_[a-z0-9_]+' || true; } | sort -u | wc -l
if command -v duplicates >/dev/null; then
  echo "== duplicate pairs"
  duplicates --repo "$dir" --seconds 120 | sed -n 1p # reads it all: no SIGPIPE under pipefail
fi
