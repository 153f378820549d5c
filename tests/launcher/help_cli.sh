# `ftl help` lists the subcommand table; `ftl help NAME` works for every command and topic it lists;
# `ftl help env` names every FTL_*, Slurm and Open MPI variable ftl's sources read (getenv) or set,
# and every one it gives the ranks.
. "$(dirname "$0")/lib.sh" || exit 1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
run_ftl out help
expect_rc 0 out
expect_contains out "usage: ftl run"
names=$(awk '/^(Commands|Topics|Internal):/{on=1; next} on && /^  [a-z]/{print $1} /^$/{on=0}' out)
[ -n "$names" ] || fail "ftl help lists no commands"
for n in $names; do
  run_ftl "help.$n" help "$n"
  expect_rc 0 "help.$n"
  [ -s "help.$n" ] || fail "ftl help $n printed nothing"
done
for n in run exit-codes env version; do echo "$names" | grep -qx "$n" || fail "ftl help does not list $n"; done
run_ftl nope help no-such-command
expect_rc 2 nope
expect_contains nope "no command or topic 'no-such-command'"
run_ftl bare
expect_rc 2 bare
run_ftl unknown no-such-command
expect_rc 2 unknown
expect_contains unknown "unknown command 'no-such-command'"
run_ftl ver --version
expect_rc 0 ver
expect_contains ver "ftl "

run_ftl env help env
vars=$(grep -rhoE '(getenv|setenv)\("[A-Z][A-Z0-9_]*"' "$SRC"/core "$SRC"/rendezvous "$SRC"/launcher "$SRC"/checkpoint \
         "$SRC"/cadence "$SRC"/pipeline "$SRC"/eval 2>/dev/null | sed -E 's/.*\("//; s/"$//' | sort -u)
vars="$vars $(sed -n '/ln_gang_env_names\[\] = {/,/};/p' "$SRC"/launcher/gang.c | grep -oE '"[A-Z][A-Z0-9_]*"' | tr -d '"')"
for v in $vars RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE; do
  case $v in
    OMPI_COMM_WORLD_*) v=OMPI_COMM_WORLD_RANK ;;
    FTL_* | SLURM_* | OMPI_* | MASTER_* | RANK | WORLD_SIZE | LOCAL_*) ;;
    *) continue ;; # the system's own (USER, HOME, LC_ALL): not ftl's to document
  esac
  grep -qw -- "$v" env || { cat env >&2; fail "ftl help env does not mention $v"; }
done
echo "ok"
