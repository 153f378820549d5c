# The man pages (docs/man/, written by scripts/gen-man.py from ftl's own help): each renders with
# groff without a warning (-ww) and with `man -l`; every public command of `ftl help` has its
# ftl-NAME.1 naming each of its options; every job-spec field of docs/job-spec.md is in ftl-job.5;
# every command's `ftl help NAME` shows how to call it; every FTL_* variable of `ftl help env` and every exit code of `ftl help exit-codes` is in ftl-env.7.
# Skipped (77) only without groff (scripts/setup-deps.sh installs groff-base and man-db).
. "$(dirname "$0")/lib.sh" || exit 1
command -v groff >/dev/null || { echo "skipped: groff is not installed"; exit 77; }
MAN=$FTL_SOURCE_DIR/docs/man
[ -d "$MAN" ] || fail "no docs/man"
for f in "$MAN"/*.[157]; do
  groff -man -ww -z "$f" >warn.txt 2>&1
  [ -s warn.txt ] && { cat warn.txt; fail "groff warns about $f"; }
  if command -v man >/dev/null; then
    MANWIDTH=80 man -l "$f" >page.txt 2>warn.txt || fail "man -l $f failed"
    [ -s warn.txt ] && { cat warn.txt; fail "man -l warns about $f"; }
    [ -s page.txt ] || fail "man -l $f rendered nothing"
  fi
done
# A page's text as plain words (roff's \- is a plain '-').
text_of() { sed -e 's/\\-/-/g' -e 's/\\e/\\/g' "$1"; }
ftl help >help.txt || fail "ftl help failed"
cmds=$(awk '/^Commands:/{on=1; next} /^[A-Z]/{on=0} on && /^  [a-z]/{print $1}' help.txt)
[ -n "$cmds" ] || fail "no commands in ftl help"
for c in $cmds; do
  ftl help "$c" >cmd-help.txt || fail "ftl help $c failed"
  grep -q "ftl $c" cmd-help.txt || { cat cmd-help.txt; fail "ftl help $c does not show how to call it"; }
  page=$MAN/ftl-$c.1
  [ -f "$page" ] || fail "command '$c' has no man page (docs/man/ftl-$c.1; run scripts/gen-man.py)"
  text_of "$page" >page.txt
  text_of "$MAN/ftl.1" | grep -q "ftl-$c" || fail "ftl.1 does not list ftl-$c"
  for opt in $(ftl help "$c" | grep -o -E -- '(^|[ ,])--[a-z][a-z-]*' | sed 's/^[ ,]//' | sort -u); do
    grep -q -- "$opt" page.txt || fail "ftl-$c.1 does not mention $opt (run scripts/gen-man.py)"
  done
done
text_of "$MAN/ftl-job.5" >job.txt
fields=$(grep -o -E '^\| `[a-z_.]+`' "$FTL_SOURCE_DIR/docs/job-spec.md" | sed -e 's/^| `//' -e 's/`$//')
[ -n "$fields" ] || fail "no fields found in docs/job-spec.md"
for f in $fields; do
  grep -q -E "^\.B $f\$" job.txt || fail "job-spec field '$f' is not in ftl-job.5 (run scripts/gen-man.py)"
done
text_of "$MAN/ftl-env.7" >env.txt
for v in $(ftl help env | grep -o -E 'FTL_[A-Z0-9_]+' | sort -u); do
  grep -q "$v" env.txt || fail "$v is not in ftl-env.7 (run scripts/gen-man.py)"
done
for code in $(ftl help exit-codes | grep -o -E '^  [0-9]+' | tr -d ' '); do
  grep -q -E "^  $code " env.txt || fail "exit code $code is not in ftl-env.7"
done
echo ok
