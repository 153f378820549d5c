# tests/unit/house_limits.sh: the house's limits on the library folders (docs/architecture.md,
# "Size"), from the numbers scripts/house-metrics.sh prints: no function over 120 lines, no file
# over 800 lines without a "Why one file" paragraph in its top comment, a map at the top of every
# file over 400 lines, and no raw durable system call outside core's file seam. Each breach is named.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
command -v ctags >/dev/null || { echo "FAIL: universal-ctags is not installed (scripts/setup-deps.sh installs it)"; exit 1; }
out=$(bash "$root/scripts/house-metrics.sh" "$root")
section() { awk -v h="== $1" 'index($0, h) == 1 { on = 1; next } /^== / { on = 0 } on' <<<"$out"; }
bad=0
long=$(section "the longest functions" | awk '$1 > 120')
if [ -n "$long" ]; then echo "FAIL: functions over 120 lines:"; echo "$long"; bad=1; fi
big=$(section "files over 800 lines" | grep -v '(why one file)$' || true)
if [ -n "$big" ]; then echo "FAIL: files over 800 lines whose top comment says not why (' * Why one file'):"; echo "$big"; bad=1; fi
nomap=$(section "files over 400 lines without a map")
if [ -n "$nomap" ]; then echo "FAIL: files over 400 lines without a map in their top comment:"; echo "$nomap"; bad=1; fi
raw=$(section "raw durable calls outside core")
if [ -n "$raw" ]; then echo "FAIL: durable system calls outside core's file seam (core_fs_table):"; echo "$raw"; bad=1; fi
# The measure itself must see the tree: a broken ctags run would pass everything.
n=$(section "the longest functions" | wc -l)
[ "$n" -ge 3 ] || { echo "FAIL: house-metrics.sh measured no functions:"; echo "$out" | head -20; bad=1; }
[ "$bad" -eq 0 ] || exit 1
echo "ok: $(section "the longest functions" | head -1)"
