# tests/fault/ft_level_steps_l2.sh: steps saved at L2 on several hosts (docs/checkpoint.md, "Each
# level at its own cadence"), 3 hosts x 2 ranks (network namespaces), the job spec naming no
# checkpoint.levels, so L2 is on by default with several hosts. Checkpoints every 7 steps, those at
# multiples of 21 in the run directory (--ckpt-l3-every), the others at L2: in the hosts' memory
# with a copy on the partner host, and their manifest in every host's L1 folder. Rank 1 is
# SIGKILLed while it writes step 35, so the newest committed step, 28, is an L2 step: the restarted
# gang restores it on every rank from L1 and L2 copies (own host's L1, the partners' L2 copies
# over the network), never from the run directory, and the adapter is byte-identical to a
# failure-free run's.
FT_STEPS=${FT_STEPS:-60}
. "$(dirname "$0")/ft_lib.sh" || exit 1
. "$(dirname "$0")/netns_lib.sh" || exit 1
RUN=runs/l2s
L1=$SCRATCH/l1
mkdir -p "$L1"

reference 6
netns_up 3
netns_hostfile 3 >hosts
write_job job.yaml l2s 6 "hostfile: hosts" "timeouts: {node_s: 5, startup_s: 60}" "rendezvous: {timeout_s: 30}" \
  "restart: {max_restarts: 2, standby: off}" "checkpoint: {l1_dir: $L1}" \
  "env: {FTL_BACKEND: mpi, FTL_CRASH_AT: after_shard_rename, FTL_CRASH_STEP: \"35\", FTL_CRASH_RANK: \"1\"}"
sed -i '/^env: {FTL_BACKEND: mpi}$/d' job.yaml
ckpt_l3_every job.yaml 21
run_job out job.yaml
expect_rc 0 out
expect_contains out "was killed by signal 9"
grep '"event":"ckpt_committed"' "$RUN/events.jsonl" | grep '"step":28,' | grep -q '"level":"l2"' ||
  { grep ckpt_committed "$RUN/events.jsonl" >&2; fail "step 28 was not committed at l2"; }
grep '"event":"ckpt_committed"' "$RUN/events.jsonl" | grep '"step":21,' | grep -q '"level":"l3"' ||
  fail "step 21 was not committed at l3"
[ ! -e "$RUN/checkpoints/step-00000028" ] || fail "an L2 step was written to the run directory"
got=$(grep '"event":"ckpt_restored"' "$RUN/events.jsonl" | grep '"attempt":1[,}]' |
  sed 's/.*"step":\([0-9]*\).*"level":"\([^"]*\)".*/\1:\2/' | sort | tr '\n' ' ')
[ "$got" = "28:l1+l2 28:l1+l2 28:l1+l2 28:l1+l2 28:l1+l2 28:l1+l2 " ] ||
  { grep ckpt_restored "$RUN/events.jsonl" >&2; fail "attempt 1 did not restore step 28 from L1 and L2: $got"; }
same_adapter ref-6/final "$RUN/final"
verify_all "$RUN"
echo "ok"
