# tests/eval/lib.sh: shared set-up of the gate's script tests: the fine-tune's small data set and
# base model (tests/finetune/lib.sh), yaml_list (tests/launcher/lib.sh), and write_job, which writes a job spec that trains the small
# adapter on 2 ranks with inputs:, eval: and registry: sections.
FT_STEPS=${FT_STEPS:-60}
. "$FTL_SOURCE_DIR/tests/finetune/lib.sh" || exit 1

# write_job FILE NAME EVAL_BLOCK [REGISTRY_BLOCK]: the small fine-tune with the given eval: (and
# registry:) sections, indented by two spaces.
write_job() {
  local file=$1 name=$2 eval_block=$3 registry_block=${4:-}
  {
    echo "name: $name"
    echo "ranks: 2"
    echo "program: ftl-finetune"
    echo "args: $(yaml_list "${FT_ARGS[@]}" --ckpt-every 20)"
    echo "env: {OMP_NUM_THREADS: \"1\", FTL_BACKEND: mpi}"
    echo "rendezvous: {timeout_s: 60}"
    echo "inputs:"
    echo "  train: data/train.txt"
    echo "  heldout: data/heldout.txt"
    echo "  base: data/base.h5"
    echo "eval:"
    printf '%s\n' "$eval_block" | sed 's/^/  /'
    if [ -n "$registry_block" ]; then
      echo "registry:"
      printf '%s\n' "$registry_block" | sed 's/^/  /'
    fi
  } >"$file"
}

# The evaluator of the example, as a gate spec block.
EXAMPLE_EVAL='program: ftl-finetune-eval
args: ["--base", "{base}", "--adapter", "{adapter}", "--data", "{data}", "--metrics", "{metrics}"]
data: heldout
base: base
timeout_s: 120'

# fake_eval PROGRAM TIMEOUT_S [LINE...]: an eval: block for an evaluator run as fake_eval.sh is
# (the metrics file, then $SCRATCH/mode, which selects its behaviour) on heldout, passing at a
# score of 0.9 or more, with the extra lines.
fake_eval() {
  local program=$1 timeout=$2
  shift 2
  printf 'program: %s\nargs: ["{metrics}", "%s/mode"]\n' "$program" "$SCRATCH"
  printf 'data: heldout\nmetric: score\ndirection: higher\nthreshold: 0.9\n'
  [ $# -eq 0 ] || printf '%s\n' "$@"
  printf 'timeout_s: %s' "$timeout"
}
