# tests/python/hf_load_fixture.sh: tests/python/hf_load.py's checks proven on a package folder made
# by transformers' and peft's own save_pretrained (tests/python/make_hf_fixture.py), on the
# held-out set of ftl-finetune-data: loads with AutoModelForCausalLM / AutoTokenizer / PeftModel
# offline, the exact match equal to the fixture's verdict.json to the last digit, the model from
# config.json alone, the merged logits against the dump. Then the same checks must fail on a
# dump one value of which is moved by 1e-3, and on a wrong exact-match figure.
. "$(dirname "$0")/hf_lib.sh" || exit 1
ftl-finetune-data --out data --pretrain 16 --train 1024 --heldout 64 >/dev/null || fail "ftl-finetune-data failed"
"$HF_PY" "$FTL_SOURCE_DIR/tests/python/make_hf_fixture.py" pkg --train data/train.txt --heldout data/heldout.txt \
  >fixture.out 2>&1 || { cat fixture.out >&2; fail "make_hf_fixture.py failed"; }
tail -1 fixture.out
value=$("$HF_PY" -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))["value"]))' pkg/verdict.json)
load() {
  "$HF_PY" "$FTL_SOURCE_DIR/tests/python/hf_load.py" pkg --heldout data/heldout.txt "$@" >load.out 2>&1
}
load --expect-exact-match "$value" --logits-input pkg/logits-input.bin --logits-dump pkg/logits.bin ||
  { cat load.out >&2; fail "hf_load.py failed on the fixture"; }
tail -1 load.out

# The checks can fail: one logit moved by 1e-3 (over the 1e-4 tolerance), then a wrong figure.
"$HF_PY" -c 'import numpy as np,sys; a=np.fromfile(sys.argv[1],dtype="<f4"); a[300]+=1e-3; a.tofile(sys.argv[2])' \
  pkg/logits.bin moved.bin
load --logits-input pkg/logits-input.bin --logits-dump moved.bin && fail "hf_load.py passed a dump off by 1e-3"
expect_contains load.out "differ from the dump"
wrong=$("$HF_PY" -c 'import sys; v=float(sys.argv[1]); print(repr(v - 1/64 if v > 0.5 else v + 1/64))' "$value")
load --expect-exact-match "$wrong" && fail "hf_load.py passed a wrong exact-match figure"
expect_contains load.out "!= the gate's"
echo ok
