# include/ftl/ftl.h is "everything in one include": it must include every other public header.
SRC=$(cd "$(dirname "$0")/../.." && pwd)
rc=0
for h in "$SRC"/include/ftl/*.h; do
  name=$(basename "$h")
  [ "$name" = ftl.h ] && continue
  grep -q "^#include \"ftl/$name\"" "$SRC/include/ftl/ftl.h" || { echo "FAIL: include/ftl/ftl.h does not include ftl/$name" >&2; rc=1; }
done
[ $rc -eq 0 ] && echo "ok"
exit $rc
