#!/usr/bin/python3
# examples/torch-lora/train.py: a PyTorch LoRA fine-tune under ftl, data-parallel over
# torch.distributed (gloo, from the MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE ftl sets; nothing of
# torchrun), with its checkpoints, progress and stop requests through ftl's Python binding.
#
# The model is a small residual MLP (blocks of fc_in -> GELU -> fc_out, named as GPT-J names its MLP)
# whose base weights come from a seed and stay frozen; a LoRA adapter on every fc_in/fc_out learns
# a fixed low-rank change of the base (the "teacher"), from data that is a function of the step.
# Deterministic: killed and resumed, it ends with the same adapter bytes as an unbroken run
# (deterministic algorithms, one thread, fixed seeds, the optimizer state and every rank's RNG state
# in the checkpoint). At the end rank 0 writes the adapter in PEFT's layout (docs/formats/peft-export.md)
# to RUNDIR/export/: adapter_model.safetensors and adapter_config.json.
#
#   ftl run examples/torch-lora/job.yaml          (docs/python.md)
#
# Not here: a real model or data set; the C example (examples/finetune) is the full pipeline's job.
import time

STARTED = time.time()  # before the imports on purpose: the torch import is part of a restart's cost

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import struct  # noqa: E402
import sys  # noqa: E402

try:
    import ftl
except ImportError:  # running from the source tree: the binding next to this example
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import ftl

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description="LoRA fine-tune of a small MLP under ftl")
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--batch", type=int, default=32, help="global batch (split over the ranks)")
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--rank", type=int, default=4, help="LoRA rank r")
    p.add_argument("--alpha", type=float, default=8.0)
    p.add_argument("--dropout", type=float, default=0.05)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ckpt-every", type=int, default=10)
    p.add_argument("--step-ms", type=float, default=0, help="sleep per step (tests: a kill lands mid-run)")
    p.add_argument("--out", default=None, help="PEFT export folder (default RUNDIR/export)")
    p.add_argument("--base-name", default="ftl-torch-lora-base")
    p.add_argument("--stamp-dir", default=None,
                   help="bench/recovery: write when this process started, restored and finished each step")
    p.add_argument("--torch-save", default=None, metavar="DIR",
                   help="without ftl (under torchrun): checkpoints with torch.save into DIR, for comparison")
    return p.parse_args()


class LoRALinear(nn.Module):
    """A frozen nn.Linear plus PEFT's LoRA: W x + (alpha / r) B A dropout(x), B starting at zero."""

    def __init__(self, base, r, alpha, dropout):
        super().__init__()
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)
        self.lora_A = nn.Linear(base.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base.out_features, bias=False)
        nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))  # PEFT's init_lora_weights=True
        nn.init.zeros_(self.lora_B.weight)
        self.scale = alpha / r
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(self.dropout(x))) * self.scale


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc_in = nn.Linear(dim, 2 * dim)
        self.fc_out = nn.Linear(2 * dim, dim)

    def forward(self, x):
        return x + self.fc_out(F.gelu(self.fc_in(x)))


class MLP(nn.Module):
    def __init__(self, dim, layers):
        super().__init__()
        self.h = nn.ModuleList([Block(dim) for _ in range(layers)])

    def forward(self, x):
        for b in self.h:
            x = b(x)
        return x


def base_model(args):
    torch.manual_seed(args.seed)
    return MLP(args.dim, args.layers)


def teacher(args):
    """The base with a fixed rank-2 change of every fc_in: what the adapter should learn."""
    t = base_model(args)
    g = torch.Generator().manual_seed(args.seed + 7)
    with torch.no_grad():
        for b in t.h:
            out_f, in_f = b.fc_in.weight.shape
            u = torch.randn(out_f, 2, generator=g) * 0.3
            v = torch.randn(2, in_f, generator=g) * 0.3
            b.fc_in.weight += u @ v
    for p in t.parameters():
        p.requires_grad_(False)
    return t


def batch(args, step, rank, world, tmodel):
    """The global batch of `step` is a function of the step alone; this rank takes its rows."""
    g = torch.Generator().manual_seed(args.seed * 1000003 + step)
    x = torch.randn(args.batch, args.dim, generator=g)
    per = args.batch // world
    x = x[rank * per:(rank + 1) * per]
    with torch.no_grad():
        y = tmodel(x)
    return x, y


def step_flops(args, rows):
    """This rank's model FLOPs in one step of `rows` examples (ctx.step_done's flops, for ftl's MFU:
    docs/gpu.md, "Useful work: MFU"), by the usual rule for a weight met by one example: 2 FLOPs
    forward (a multiply-add), 2 backward for the gradient of its input, and 2 more for its own
    gradient when it trains: 4 per frozen base weight, 6 per LoRA weight. Per block, the base's
    fc_in (dim -> 2 dim) and fc_out (2 dim -> dim) hold 4 dim^2 weights, their adapters r (dim +
    2 dim) each, 6 r dim together. Biases, GELU, dropout, the loss and the optimizer are elementwise
    and not counted (MFU's convention), nor is the input gradient autograd skips before the first
    layer: the rule counts the model, not this run's shortcuts."""
    base = args.layers * 4 * args.dim * args.dim
    lora = args.layers * 6 * args.rank * args.dim
    return rows * (4 * base + 6 * lora)


def lora_modules(model):
    """(PEFT module path, LoRALinear) in a fixed order."""
    return [(f"h.{i}.{name}", getattr(b, name)) for i, b in enumerate(model.h) for name in ("fc_in", "fc_out")]


def write_atomic(path, data):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def safetensors_bytes(tensors, metadata):
    """The safetensors file of F32 tensors in the canonical form pipeline/safetensors.c writes
    (and safetensors.torch.save_file): tensors by name, a compact header padded with spaces to 8."""
    header, blobs, off = {"__metadata__": dict(sorted(metadata.items()))}, [], 0
    for name in sorted(tensors):
        raw = tensors[name].detach().contiguous().to(torch.float32).numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def export_peft(args, model, out_dir):
    """RUNDIR/export/ in PEFT's layout (docs/formats/peft-export.md)."""
    os.makedirs(out_dir, exist_ok=True)
    tensors = {}
    for path, m in lora_modules(model):
        tensors[f"base_model.model.{path}.lora_A.weight"] = m.lora_A.weight
        tensors[f"base_model.model.{path}.lora_B.weight"] = m.lora_B.weight
    # The keys of the pinned PEFT's LoraConfig (python/requirements-hf.txt): it refuses keys it does
    # not know, such as newer releases' exclude_modules and lora_bias.
    config = {
        "alpha_pattern": {}, "auto_mapping": None, "base_model_name_or_path": args.base_name, "bias": "none",
        "fan_in_fan_out": False, "inference_mode": True, "init_lora_weights": True,
        "layer_replication": None, "layers_pattern": None, "layers_to_transform": None,
        "lora_alpha": int(args.alpha) if args.alpha == int(args.alpha) else args.alpha,
        "lora_dropout": 0.0, "modules_to_save": None, "peft_type": "LORA", "r": args.rank, "rank_pattern": {},
        "revision": None, "target_modules": ["fc_in", "fc_out"], "task_type": None, "use_dora": False,
        "use_rslora": False,
    }
    write_atomic(os.path.join(out_dir, "adapter_model.safetensors"), safetensors_bytes(tensors, {"format": "pt"}))
    write_atomic(os.path.join(out_dir, "adapter_config.json"), json.dumps(config, indent=2, sort_keys=True).encode())


class TorchrunContext:
    """What the program uses of ftl.Context, from torchrun's variables (--torch-save). It keeps
    ftl.Context's signatures, so every ctx. call of main() works under both; torchrun has no
    heartbeat, progress line or stop request, so those are no-ops (bench/recovery's smoke test,
    tests/bench, runs this side to the first resumed step, so a call missing here fails there)."""

    def __init__(self):
        self.rank, self.world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        self.attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
        self.run_dir = None

    def step_done(self, step, flops=None):
        pass

    def progress_report(self, step, total_steps=0, loss=float("nan"), tokens=0):
        pass

    def progress_section(self, section):
        pass

    def stop_pending(self):
        return False

    def stop_requested(self):
        return False, ""

    def finalize(self):
        pass


class TorchSaveCheckpoint:
    """The checkpoint a torchrun program typically writes, for the benchmark's comparison: at each
    save every rank writes its registered state with torch.save (synchronously) to
    DIR/step-S-rank-R.pt; restore takes the newest step every rank has. No verification."""

    def __init__(self, folder, rank, world):
        self.dir, self.rank, self.world, self.items = folder, rank, world, {}
        os.makedirs(folder, exist_ok=True)

    def add(self, name, t, **_):
        self.items[name] = t

    def add_blob(self, name, size, per_rank=False):
        self.items[name] = np.zeros(size, dtype=np.uint8)
        return self.items[name]

    def _steps(self):
        return {int(f.split("-")[1]) for f in os.listdir(self.dir) if f.endswith(f"-rank-{self.rank}.pt")}

    def save(self, step):
        state = {k: (torch.from_numpy(v.copy()) if isinstance(v, np.ndarray) else v.clone()) for k, v in self.items.items()}
        path = os.path.join(self.dir, f"step-{step}-rank-{self.rank}.pt")
        torch.save(state, path + ".tmp")
        os.replace(path + ".tmp", path)
        for old in sorted(self._steps())[:-2]:
            os.unlink(os.path.join(self.dir, f"step-{old}-rank-{self.rank}.pt"))

    def wait(self):
        pass

    def restore(self):
        everyone = [None] * self.world
        dist.all_gather_object(everyone, self._steps())
        common = set.intersection(*everyone)
        if not common:
            return -1
        step = max(common)
        state = torch.load(os.path.join(self.dir, f"step-{step}-rank-{self.rank}.pt"))
        for k, v in self.items.items():
            if isinstance(v, np.ndarray):
                v[:] = state[k].numpy()
            else:
                v.copy_(state[k])
        return step

    def close(self):
        pass


def init_process_group(ctx, rank, world):
    """gloo over a TCPStore on rank 0 (MASTER_ADDR/MASTER_PORT). Under ftl, rank 0's store listens
    before any other rank connects (an ftl barrier between): a client that finds no listener yet
    retries only after a second, which would be most of a warm restart (docs/fault-tolerance.md)."""
    if isinstance(ctx, TorchrunContext):
        dist.init_process_group("gloo", rank=rank, world_size=world)
        return
    import datetime
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    timeout = datetime.timedelta(seconds=300)
    store = dist.TCPStore(addr, port, world, True, timeout, wait_for_workers=False) if rank == 0 else None
    ctx.barrier()
    if store is None:
        store = dist.TCPStore(addr, port, world, False, timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)


def main():
    args = parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    ctx = TorchrunContext() if args.torch_save else ftl.init()
    rank, world = ctx.rank, ctx.world_size
    stamps = None
    if args.stamp_dir:
        stamps = open(os.path.join(args.stamp_dir, f"lora-a{ctx.attempt}-r{rank}.log"), "w")
        stamps.write(f"started {STARTED} pid {os.getpid()}\n")
        stamps.flush()
    if args.batch % world:
        print(f"--batch {args.batch} is not a multiple of the {world} ranks", file=sys.stderr)
        return 2
    init_process_group(ctx, rank, world)

    model = base_model(args)
    for b in model.h:
        b.fc_in = LoRALinear(b.fc_in, args.rank, args.alpha, args.dropout)
        b.fc_out = LoRALinear(b.fc_out, args.rank, args.alpha, args.dropout)
    tmodel = teacher(args)
    params = [p for _, m in lora_modules(model) for p in (m.lora_A.weight, m.lora_B.weight)]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    # The optimizer's state made now, so its tensors can be registered (AdamW updates them in place).
    for p in params:
        opt.state[p] = {"step": torch.zeros((), dtype=torch.float32), "exp_avg": torch.zeros_like(p),
                        "exp_avg_sq": torch.zeros_like(p)}
    torch.manual_seed(args.seed * 7919 + 1 + rank)  # dropout: each rank its own stream

    ck = TorchSaveCheckpoint(args.torch_save, rank, world) if args.torch_save else ctx.checkpoint(keep=3)
    for path, m in lora_modules(model):
        ck.add(f"{path}.lora_A", m.lora_A.weight.data)
        ck.add(f"{path}.lora_B", m.lora_B.weight.data)
    for i, p in enumerate(params):
        st = opt.state[p]
        ck.add(f"opt.{i}.exp_avg", st["exp_avg"])
        ck.add(f"opt.{i}.exp_avg_sq", st["exp_avg_sq"])
        ck.add(f"opt.{i}.step", st["step"])
    rng = ck.add_blob("rng", size=torch.get_rng_state().numel(), per_rank=True)

    done = ck.restore()  # -1: a fresh start
    if done >= 0:
        torch.set_rng_state(torch.from_numpy(rng.copy()))
        print(f"rank {rank}: resumed from step {done} (attempt {ctx.attempt})", flush=True)
    done = max(done, 0)
    if stamps:
        stamps.write(f"restored {time.time()} step {done}\n")
        stamps.flush()

    def save(step):
        rng[:] = torch.get_rng_state().numpy()
        ck.save(step)

    grads = torch.zeros(sum(p.numel() for p in params) + 1)
    t0 = time.time()
    while done < args.steps:
        step = done + 1
        x, y = batch(args, step, rank, world, tmodel)
        opt.zero_grad(set_to_none=False)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        # One allreduce per step: the gradients and, folded in, this rank's stop vote.
        torch.cat([p.grad.reshape(-1) for p in params] + [torch.tensor([float(ctx.stop_pending())])], out=grads)
        dist.all_reduce(grads)
        off = 0
        for p in params:
            p.grad.copy_(grads[off:off + p.numel()].view_as(p) / world)
            off += p.numel()
        stop = grads[-1].item() > 0
        opt.step()
        done = step
        ctx.step_done(done, flops=step_flops(args, x.shape[0]))
        if stamps:
            stamps.write(f"step {done} {time.time()}\n")
            stamps.flush()
        if rank == 0 and (done % 20 == 0 or done == 1 or done == args.steps):
            print(f"step {done} loss {loss.item():.6f}", flush=True)
            # ftl draws the progress line and records loss against step for `ftl report`.
            ctx.progress_report(done, args.steps, loss.item(), done * world * x.shape[0])
        if stop:
            save(done)
            ck.wait()
            print(f"rank {rank}: stop requested; checkpoint {done} committed, exiting", flush=True)
            ck.close()
            dist.destroy_process_group()
            ctx.finalize()
            return 0
        if done % args.ckpt_every == 0:
            save(done)
        if args.step_ms:
            time.sleep(args.step_ms / 1000.0)
    # Not a training step from here (the last commit, rank 0's export and evaluation while the
    # others wait): the checkpoint timeout applies, so a tight timeouts.step_s does not call the
    # waiting ranks hung after the last step.
    ctx.progress_section("checkpoint")
    ck.wait()
    if rank == 0:
        out = args.out or os.path.join(ctx.run_dir or ".", "export")
        export_peft(args, model, out)
        with torch.no_grad():
            xe, ye = batch(args, 10 ** 6, 0, 1, tmodel)
            base_loss = F.mse_loss(base_model(args)(xe), ye).item()
            model.eval()
            tuned_loss = F.mse_loss(model(xe), ye).item()
        print(f"done: {done} steps in {time.time() - t0:.1f} s; held-out loss base {base_loss:.6f}, "
              f"adapter {tuned_loss:.6f}; PEFT adapter in {out}", flush=True)
    ck.close()
    dist.destroy_process_group()
    ctx.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
