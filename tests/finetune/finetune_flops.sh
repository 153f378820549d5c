# tests/finetune/finetune_flops.sh: the example fine-tune's model FLOPs (examples/finetune/
# model_flops.c, reported with ftl_step_done_flops) against a hand count of its model written here
# from the model's dimensions alone, and the MFU ftl makes of them on a machine without a GPU
# (docs/gpu.md, "Useful work: MFU"):
#  1. a 2-rank run of 10 steps: the attempt's final `mfu` event says the gang did exactly 10 times
#     the hand count (the ranks' last steps come with ftl_finalize's bye, past the heartbeats'
#     throttle), and `ftl status --json` says the same;
#  2. with no GPU and no mfu.peak_tflops, the peak is a measured CPU GEMM peak, said as such in the
#     event, `ftl status` and the run's summary line, and the MFU is in (0, 1].
FT_STEPS=10
. "$FTL_SOURCE_DIR/tests/finetune/lib.sh" || exit 1
# No fake NVML: this host's GPUs are none, as on the CI machines.
unset FTL_NVML_FAKE

run_ftl run.out run -n 2 --progress off --max-restarts 0 --run-dir r -- ftl-finetune "${FT_ARGS[@]}" --ckpt-every 0
expect_rc 0 run.out
expect_one_attempt r run.out
run_ftl status.out status r
expect_rc 0 status.out
run_ftl status.json status r --json
expect_rc 0 status.json

python3 - r/events.jsonl status.json <<'PY' || fail "the fine-tune's FLOPs or MFU are not what the hand count says"
import json, sys

# The model of tests/finetune/lib.sh, by its dimensions: 1 layer, hidden 32, 2 heads, the SwiGLU
# MLP's width 88 (8/3 of 32 rounded up to a multiple of 8), a vocabulary of 256 bytes; a LoRA adapter
# of rank 4 on q, v, o, gate and up (the example's default targets); a global batch of 8 sequences
# of 18 tokens (a newline and the 17 bytes of "abcdefgh>bcdefghi", ftl-finetune-data's --len 8), 9
# of them scored (the answer's 8 letters and the closing newline).
L, C, H, I, V, r = 1, 32, 2, 88, 256, 4
B, T, scored_per_seq = 8, 18, 9
head = C // H
lins = {"q": (C, C), "k": (C, C), "v": (C, C), "o": (C, C), "gate": (C, I), "up": (C, I), "down": (I, C)}
adapted = ["q", "v", "o", "gate", "up"]
tokens = B * T
# Multiply-adds, module by module.
base_fwd = tokens * sum(i * o for i, o in lins.values())            # x W^T
lora_fwd = tokens * sum(r * lins[m][0] + lins[m][1] * r for m in adapted)  # x A^T, then B
attn_fwd = B * H * sum((t + 1) * head * 2 for t in range(T))         # q.k over the causal triangle, then att.v
head_fwd = B * scored_per_seq * V * C                                # logits at scored positions only
base_bwd = base_fwd                                                  # dx = dy W (W frozen: no dW)
lora_bwd = 2 * lora_fwd                                              # du, dB, dx through A, dA
attn_bwd = 2 * attn_fwd                                              # dv and d(scores); dq and dk
head_bwd = head_fwd                                                  # dh = dlogits E (E frozen)
macs = L * (base_fwd + lora_fwd + attn_fwd + base_bwd + lora_bwd + attn_bwd) + head_fwd + head_bwd
per_step = 2 * macs
want = 10 * per_step

events = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
final = [e for e in events if e["event"] == "mfu" and e.get("final")]
assert len(final) == 1, f"expected one final mfu event, got {len(final)}"
f = final[0]
got = f["model_flops"]
print(f"hand count {per_step:.0f} FLOPs a step, {want:.0f} for 10 steps; the launcher saw {got:.0f} from {f['ranks']} ranks")
assert f["ranks"] == 2, f
assert abs(got - want) <= 1e-9 * want, f"model_flops {got} != {want}"
# The CPU path: the peak measured, said so, and an MFU in (0, 1].
assert f["peak_source"] == "cpu", f
assert "measured CPU GEMM peak" in f["peak"], f
assert f["peak_flops"] > 0, f
assert 0 < f["avg_mfu"] <= 1, f
assert 0 < f["mfu"] <= 1, f
st = json.load(open(sys.argv[2]))
uw = st["useful_work"]
assert uw and abs(uw["model_flops"] - want) <= 1e-9 * want, uw
assert uw["peak_source"] == "cpu" and 0 < uw["mfu"] <= 1, uw
assert "measured CPU GEMM peak" in uw["text"], uw
print("status:", uw["text"])
PY
# Said as such wherever shown: ftl status and the run's own summary.
expect_contains status.out "of a measured CPU GEMM peak"
expect_contains run.out "× MFU "
expect_contains run.out "of a measured CPU GEMM peak"
grep -q '"event":"run_goodput".*"mfu_pct":' r/events.jsonl || fail "run_goodput has no mfu_pct"
echo ok
