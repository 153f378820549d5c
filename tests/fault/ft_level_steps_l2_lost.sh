# tests/fault/ft_level_steps_l2_lost.sh: a step saved at L2 restored after its host is lost, when a
# shard's only live copy is another host's L1 copy (docs/checkpoint.md, "Each level at its own
# cadence", "What it covers"). 3 hosts x 2 ranks and a spare (network namespaces), no
# checkpoint.levels (L2 on by default), checkpoints every 7 steps, those at multiples of 21 in the
# run directory (--ckpt-l3-every), the others at L2. Placement (sorted hosts h1 h2 h3, partner of
# host i is host i+1): shards 0, 1 have L1 on h1 and L2 on h2; shards 2, 3 L1 on h2 and L2 on h3;
# shards 4, 5 L1 on h3 and L2 on h1. Rank 4 (on h3) is SIGKILLed while it writes step 35, with
# restarts off, so the newest committed step is 28, an L2 step; then host 3 is lost with its memory
# (its copies deleted: the namespaces share one file system) and the job is run again with the
# spare h4 in its place. Shards 2 and 3 now exist only in h2's L1 folder, and every rank of the
# fine-tune reads every shard: h1's and h4's ranks must fetch them from h2's L1 copies (so the
# step is restorable, and restored, rather than passed over for step 21 in the run directory).
# Each rank's ckpt_restored says step 28 with where its shards came from, and the adapter is
# byte-identical to a failure-free run's. Deterministic: a crash point, not a race with the job.
FT_STEPS=${FT_STEPS:-60}
. "$(dirname "$0")/ft_lib.sh" || exit 1
. "$(dirname "$0")/netns_lib.sh" || exit 1
RUN=runs/l2lost
L1=$SCRATCH/l1
mkdir -p "$L1"

reference 6
netns_up 4
netns_hostfile 3 >hosts
write_job job.yaml l2lost 6 "hostfile: hosts" "timeouts: {node_s: 5, startup_s: 60}" "rendezvous: {timeout_s: 30}" \
  "restart: {max_restarts: 0, standby: off}" "checkpoint: {l1_dir: $L1}" \
  "env: {FTL_BACKEND: mpi, FTL_CRASH_AT: after_shard_rename, FTL_CRASH_STEP: \"35\", FTL_CRASH_RANK: \"4\"}"
sed -i '/^env: {FTL_BACKEND: mpi}$/d' job.yaml
ckpt_l3_every job.yaml 21
run_job out job.yaml
[ "$RC" != 0 ] || fail "the job with its restarts off finished after rank 4 was killed"
expect_contains out "was killed by signal 9"
grep '"event":"ckpt_committed"' "$RUN/events.jsonl" | grep '"step":28,' | grep -q '"level":"l2"' ||
  { grep ckpt_committed "$RUN/events.jsonl" >&2; fail "step 28 was not committed at l2"; }
[ ! -e "$RUN/checkpoints/step-00000028" ] || fail "an L2 step was written to the run directory"

# The gap's precondition, from step 28's manifest: shards 2 and 3 are kept in h2's L1 and h3's L2.
step28=$(ls -d "$L1"/ftl-*/step-00000028)
python3 - "$step28/manifest.json" "$NS_PREFIX" <<'PY' || fail "step 28 is not placed as this test needs"
import json, sys
m, p = json.load(open(sys.argv[1])), sys.argv[2]
want = {0: ("h1", "h2"), 1: ("h1", "h2"), 2: ("h2", "h3"), 3: ("h2", "h3"), 4: ("h3", "h1"), 5: ("h3", "h1")}
for sh in m["shards"]:
    l1, l2 = want[sh["rank"]]
    if (sh.get("l1_host"), sh.get("l2_host")) != (p + "-" + l1, p + "-" + l2):
        sys.exit("shard %d: l1_host %s, l2_host %s" % (sh["rank"], sh.get("l1_host"), sh.get("l2_host")))
PY
# ftl ckpt verify reads every level: on each host, the copies of step 28 (saved below L3) that its
# L1 folder keeps, its own shards' (l1) and its partner's (l2).
for h in 1 2 3; do
  for l in l1 l2; do
    on_host $h env FTL_CKPT_L1_DIR="$L1" ftl ckpt verify "$RUN" 28 --level $l >verify-$h-$l.txt 2>&1 ||
      { cat verify-$h-$l.txt >&2; fail "ftl ckpt verify --level $l of step 28 failed on h$h"; }
  done
done
expect_contains verify-2-l1.txt "step-00000028/shard-00002.h5: ok"
expect_contains verify-2-l1.txt "step-00000028/shard-00003.h5: ok"
expect_contains verify-3-l2.txt "step-00000028/partner/shard-00002.h5: ok"
expect_contains verify-1-l2.txt "step-00000028/partner/shard-00005.h5: ok"
# Host 3 is lost, and its memory with it: its L1 copies (shards 4, 5) and the L2 copies it kept
# (shards 2, 3). Shards 2 and 3 are left only in h2's L1 folder.
kill_host 3
for f in shard-00004.h5 shard-00005.h5 partner/shard-00002.h5 partner/shard-00003.h5; do
  [ -f "$step28/$f" ] || fail "no copy $f of step 28 in $step28"
  rm "$step28/$f"
done
[ -f "$step28/shard-00002.h5" ] && [ -f "$step28/shard-00003.h5" ] || fail "h2's L1 copies of step 28 are missing"

# The spare takes host 3's place.
printf '%s slots=2\n' "$NET.1" "$NET.2" "$NET.4" >hosts
run_job out2 job.yaml
expect_rc 0 out2
grep '"event":"rank_started"' "$RUN/events.jsonl" | grep '"attempt":1' | grep -q "\"host\":\"$NS_PREFIX-h4\"" ||
  fail "the spare host did not take the lost host's place"
# Each rank's step:level/l2_shards. h1 (ranks 0, 1): shards 0, 1 from its L1, 4, 5 from the L2
# copies it keeps, 2, 3 fetched from h2's L1; h2 (2, 3): 2, 3 from its L1, 0, 1 from its L2
# copies, 4, 5 fetched from h1's L2 copies; h4 (4, 5): every shard fetched (a shard that crossed
# the network counts as l2, whichever copy it came from).
got=""
for r in 0 1 2 3 4 5; do
  e=$(grep '"event":"ckpt_restored"' "$RUN/events.jsonl" | grep '"attempt":1[,}]' | grep "\"rank\":$r[,}]")
  got="$got$(echo "$e" | grep -o '"step":[0-9]*' | cut -d: -f2):$(echo "$e" | grep -o '"level":"[^"]*"' | cut -d'"' -f4)"
  got="$got/$(echo "$e" | grep -o '"l2_shards":[0-9]*' | cut -d: -f2) "
done
[ "$got" = "28:l1+l2/4 28:l1+l2/4 28:l1+l2/4 28:l1+l2/4 28:l2/6 28:l2/6 " ] ||
  { grep ckpt_restored "$RUN/events.jsonl" >&2; fail "attempt 1 did not restore step 28 from the live hosts' memory: $got"; }
same_adapter ref-6/final "$RUN/final"
verify_all "$RUN"
echo "ok"
