# tests/python/hf_finish_sweep.sh: examples/hf-lora (transformers + peft through ftl.hf) as a pipeline
# job, hit at each boundary of its end and run again, as tests/eval/finish_sweep.sh does for the C
# job: rank 1 SIGKILLed right after the commit of the final step (ftl.hf.TrainingState.finish()
# then has nothing to save and the restart only exports), rank 0 SIGKILLed writing final/ (before
# its commit marker), and the launcher SIGKILLed after the training, during the gate's verdict,
# during the publish and right after it, each followed by `ftl run` again. Every case ends with exit
# 0, final/ byte-identical to an unbroken run's and one version published; a rerun of the published
# run says "already finished" and starts nothing.
. "$(dirname "$0")/hf_lib.sh" || exit 1
. "$(dirname "$0")/../eval/finish_lib.sh" || exit 1
hf_pipeline_setup
STEPS=55
EVERY=11 # the final step is a checkpoint step: the kill lands after its commit
FILES=(adapter_model.safetensors adapter_config.json README.md COMMIT)
export PYTHONHASHSEED=1


hf_pipeline_job ref.yaml ref $STEPS $EVERY
run_ftl ref.out run --run-dir ref ref.yaml
expect_rc 0 ref.out
expect_contains ref.out "published ref version"

hf_pipeline_job r1.yaml r1 $STEPS $EVERY "FTL_CRASH_AT: after_commit, FTL_CRASH_RANK: \"1\", FTL_CRASH_STEP: \"$STEPS\""
run_ftl r1.out run --run-dir r1 r1.yaml
expect_contains r1.out "crash point after_commit reached"
sweep_trained_again r1 && fail "rank-after-final-commit: a restart trained again after the final commit"
sweep_row rank-after-final-commit r1 "$RC"

hf_pipeline_job r2.yaml r2 $STEPS $EVERY "FTL_CRASH_AT: adapter.commit"
run_ftl r2.out run --run-dir r2 r2.yaml
expect_contains r2.out "crash point adapter.commit reached"
[ -d r2/attempt-0001 ] || fail "rank-during-export: no restart after rank 0 died writing final/"
sweep_trained_again r2 && fail "rank-during-export: the restart trained again"
ls -d r2/final.tmp.* >/dev/null 2>&1 && fail "rank-during-export: the dead export's temporary folder was left"
sweep_row rank-during-export r2 "$RC"

hf_pipeline_job l.yaml l $STEPS $EVERY
sweep_launcher_requeues l
sweep_rerun_published l

sweep_table
expect_no_leftovers
echo ok
