"""ftl.hf: ftl's checkpoints, progress and stop requests for a Hugging Face PEFT training loop.

A researcher's script keeps its model (`get_peft_model(LlamaForCausalLM...)`), its optimizer and
its loop; `TrainingState` puts what a resumed run needs into one ftl checkpoint and gives it back:

    ctx = ftl.init()
    state = ftl.hf.TrainingState(ctx, model, optimizer, total_steps=N, ckpt_every=50)
    start = state.restore()                       # 0 on a fresh start, else the committed step
    for step in range(start + 1, N + 1):
        ...forward, backward, optimizer.step()...
        if state.step_end(step, loss.item()):    # heartbeat, progress, checkpoint, stop request
            break
    state.finish(model)                           # last commit; rank 0: save_pretrained to RUNDIR/final

What is registered (docs/python.md, "Hugging Face: ftl.hf"): every trainable parameter of the
model (a PEFT model's LoRA tensors), the optimizer's state tensors (Adam/AdamW's are made before
the first step so that they can be registered; the optimizer updates them in place), a per-rank
blob with the CPU generators' states (torch, numpy's global one, Python's `random`), and a global
blob with the data position (`state.position`, which the script sets) and a digest of the frozen
weights, so a run resumed on a different base is refused rather than trained on silently.

transformers' Trainer: `ftl.hf.trainer_init()` before TrainingArguments and `ftl.hf.train(trainer)`
instead of `trainer.train()` (python/ftl/hf_trainer.py, imported on first use; docs/python.md,
"transformers Trainer").

Not here: the frozen base itself (the script rebuilds it, from a folder or a seed), CUDA
generators, optimizers other than Adam/AdamW before their first step (their state must exist at
registration).
"""
import glob
import hashlib
import os
import random
import shutil
import struct

import numpy as np

__all__ = ["TrainingState", "prime_optimizer", "export_adapter", "init_process_group"]

# transformers' Trainer (ftl/hf_trainer.py): ftl.hf.trainer_init, .train, .FtlTrainerCallback and
# .under_ftl, imported on first use (and not by `import *`), so that a script with its own loop does
# not pay for importing transformers' Trainer here.
_TRAINER_NAMES = ("trainer_init", "train", "FtlTrainerCallback", "under_ftl")


def __getattr__(name):
    if name in _TRAINER_NAMES:
        from . import hf_trainer

        return getattr(hf_trainer, name)
    raise AttributeError(f"module 'ftl.hf' has no attribute {name!r}")


_POS = struct.Struct("<q")  # the global blob: data position, then the 32-byte base digest
_GLOBAL_BYTES = _POS.size + 32


def init_process_group(ctx, backend="gloo"):
    """torch.distributed from ftl's gang (MASTER_ADDR, MASTER_PORT, ctx's rank and world size): a
    TCPStore on rank 0 that listens before any other rank connects (an ftl barrier between), since
    torch retries a connection that finds no listener yet only a second later, which a warm restart
    would wait for. Collective: every rank calls it, after ftl.init()."""
    import datetime

    import torch.distributed as dist

    addr, port, world = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), ctx.world_size
    timeout = datetime.timedelta(seconds=300)
    store = dist.TCPStore(addr, port, world, True, timeout, wait_for_workers=False) if ctx.rank == 0 else None
    ctx.barrier()
    if store is None:
        store = dist.TCPStore(addr, port, world, False, timeout)
    dist.init_process_group(backend, store=store, rank=ctx.rank, world_size=world)


def prime_optimizer(optimizer):
    """Makes torch.optim.Adam/AdamW's per-parameter state now (zeros, step 0: what their first
    step would make), so the tensors exist to be registered. A state already there is kept."""
    import torch

    if not isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)):
        return optimizer
    for group in optimizer.param_groups:
        for p in group["params"]:
            if not p.requires_grad or optimizer.state[p]:
                continue
            st = {"step": torch.zeros((), dtype=torch.float32), "exp_avg": torch.zeros_like(p),
                  "exp_avg_sq": torch.zeros_like(p)}
            if group.get("amsgrad"):
                st["max_exp_avg_sq"] = torch.zeros_like(p)
            optimizer.state[p] = st
    return optimizer


def _rng_sizes():
    import torch

    return torch.get_rng_state().numel(), 624 * 4 + 16, 625 * 8 + 9


def _rng_pack(buf):
    """The CPU generators' states into the per-rank blob: torch's, numpy's MT19937, Python's."""
    import torch

    nt, nn_, _ = _rng_sizes()
    buf[:nt] = torch.get_rng_state().numpy()
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    buf[nt:nt + 2496] = np.frombuffer(np.asarray(keys, dtype="<u4").tobytes(), dtype=np.uint8)
    buf[nt + 2496:nt + nn_] = np.frombuffer(struct.pack("<iid", pos, has_gauss, gauss), dtype=np.uint8)
    version, internal, gauss_next = random.getstate()
    tail = struct.pack(f"<{len(internal)}Q", *internal) + struct.pack(
        "<?d", gauss_next is not None, gauss_next or 0.0)
    buf[nt + nn_:] = np.frombuffer(tail, dtype=np.uint8)


def _rng_decode(buf):
    """The states _rng_pack wrote, without setting them: (torch's as a uint8 tensor, numpy's as
    np.random.get_state() gives it, Python's as random.getstate() gives it). ftl.hf_trainer hands
    them to Trainer in its own rng_state file, which Trainer sets at the point of its choosing."""
    import torch

    nt, nn_, _ = _rng_sizes()
    torch_state = torch.from_numpy(buf[:nt].copy())
    keys = np.frombuffer(buf[nt:nt + 2496].tobytes(), dtype="<u4").astype(np.uint32)
    pos, has_gauss, gauss = struct.unpack("<iid", buf[nt + 2496:nt + nn_].tobytes())
    raw = buf[nt + nn_:].tobytes()
    internal = struct.unpack("<625Q", raw[:5000])
    has_next, gauss_next = struct.unpack("<?d", raw[5000:])
    return torch_state, ("MT19937", keys, pos, has_gauss, gauss), (3, internal, gauss_next if has_next else None)


def _rng_unpack(buf):
    import torch

    torch_state, numpy_state, python_state = _rng_decode(buf)
    torch.set_rng_state(torch_state)
    np.random.set_state(numpy_state)
    random.setstate(python_state)


def _base_digest(model):
    """SHA-256 of the frozen parameters and buffers, by name: what the adapter was trained on."""
    import torch

    h = hashlib.sha256()
    frozen = [(n, p) for n, p in model.named_parameters() if not p.requires_grad]
    for name, t in sorted(frozen + list(model.named_buffers()), key=lambda x: x[0]):
        h.update(name.encode() + b"\0" + str(t.dtype).encode() + str(tuple(t.shape)).encode())
        h.update(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.digest()


def train_flops(model, batch, seq_len):
    """The model FLOPs of one training step of `batch` sequences of `seq_len` tokens: what to give
    `step_end(..., flops=)` (ctx.step_done's flops) for ftl's model FLOPs utilisation (docs/gpu.md,
    "Useful work: MFU"). The usual rule: each weight of a linear layer (every torch.nn.Linear, a PEFT
    model's LoRA factors among them) costs a token 2 FLOPs forward, 2 for its input's gradient and,
    when it trains, 2 for its own: 6 per trainable weight, 4 per frozen one. Causal attention adds
    its scores and weighted sums, 2 hidden seq_len (seq_len + 1) FLOPs a sequence and layer forward
    and twice that backward (hidden_size and num_hidden_layers from model.config). Embedding lookups,
    norms, activations and the optimizer are not counted (MFU's convention)."""
    return _flops_of(_flops_terms(model), batch, seq_len)


def _flops_terms(model):
    """What train_flops needs of the model, walked once: (the linears' FLOPs per token, the attention's
    factor 6 hidden layers). ftl.hf.train keeps them for every micro-batch of a Trainer run."""
    import torch

    per_token = 0
    for m in model.modules():
        if type(m) is torch.nn.Linear:
            per_token += (6 if m.weight.requires_grad else 4) * m.weight.numel()
    cfg = getattr(model, "config", None)
    hidden = getattr(cfg, "hidden_size", None) or getattr(cfg, "n_embd", 0) or 0
    layers = getattr(cfg, "num_hidden_layers", None) or getattr(cfg, "n_layer", 0) or 0
    return per_token, 3 * 2 * hidden * layers


def _flops_of(terms, batch, seq_len):
    """train_flops from the model's terms (_flops_terms): `batch` sequences of `seq_len` tokens."""
    per_token, attention = terms
    return float(batch) * (seq_len * per_token + attention * seq_len * (seq_len + 1))


def _ck_name(prefix, name):
    """A checkpoint tensor name (1-127 bytes of [A-Za-z0-9_.-], include/ftl/ckpt.h) for a module
    path: other bytes become '_', and a name too long keeps its tail and a digest of the whole."""
    safe = prefix + "." + "".join(c if c.isascii() and (c.isalnum() or c in "_.-") else "_" for c in name)
    if len(safe) <= 127:
        return safe
    return f"{prefix}.{hashlib.sha256(name.encode()).hexdigest()[:16]}.{safe[-(126 - len(prefix) - 17):]}"


def _fsync_tree(folder):
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                os.fsync(f.fileno())
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def base_name(model):
    """The name an exported adapter gives its base when the base came from a local folder:
    "ftl-base-" and 16 hex digits of the SHA-256 of its frozen weights (what the adapter was
    trained on), a name no model hub holds."""
    return "ftl-base-" + _base_digest(model).hex()[:16]


def export_adapter(model, out_dir, commit=True):
    """`model.save_pretrained` into OUT_DIR as one step: written and fsynced into a sibling
    temporary folder, then renamed over OUT_DIR, so a reader (or a restarted rank 0) sees either
    the whole adapter or none of it. With `commit`, the folder gets ftl's commit marker over every
    file save_pretrained wrote (COMMIT, ftl.commit_adapter) before the rename, so RUNDIR/final
    written this way is what the gate and `ftl publish` take (docs/pipeline.md, "A PEFT adapter
    through the gate"). Returns OUT_DIR."""
    out_dir = os.path.abspath(out_dir)
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = f"{out_dir}.tmp.{os.getpid()}"
    # What an earlier writer killed mid-export left (one writer per folder: rank 0 of the job).
    for stale in glob.glob(glob.escape(out_dir) + ".tmp.*") + glob.glob(glob.escape(out_dir) + ".old.*"):
        shutil.rmtree(stale, ignore_errors=True)
    # peft keeps target_modules (and other name lists) as sets and writes list(set): an order
    # that follows the process's string-hash seed, so two runs of one job would write different
    # adapter_config.json bytes. They are saved sorted, then put back as they were.
    configs = list(getattr(model, "peft_config", {}).values())
    saved = [(c, k, v) for c in configs for k, v in vars(c).items() if isinstance(v, set)]
    # A base loaded from a local folder is named in adapter_config.json by that folder's path, which
    # means nothing where the adapter is used (and, in the training tree, a base other than the
    # one it ships with). It is named by its weights instead (base_name): `ftl registry fetch`
    # registers the version's base/ under that name in the Hugging Face cache, so that
    # AutoPeftModelForCausalLM finds it from any folder (docs/pipeline.md, "Serving").
    local = [(c, "base_model_name_or_path", c.base_model_name_or_path) for c in configs
             if isinstance(getattr(c, "base_model_name_or_path", None), str) and os.path.isdir(c.base_model_name_or_path)]
    name = base_name(model) if local else None
    saved += local
    try:
        for c, k, v in saved:
            setattr(c, k, name if k == "base_model_name_or_path" else sorted(v))
        model.save_pretrained(tmp)
    finally:
        for c, k, v in saved:
            setattr(c, k, v)
    _fsync_tree(tmp)
    if commit:
        import ftl

        ftl.commit_adapter(tmp, sorted(n for n in os.listdir(tmp) if os.path.isfile(os.path.join(tmp, n))))
    if os.path.isdir(out_dir):  # an older export (a run started again from scratch): replaced
        old = f"{out_dir}.old.{os.getpid()}"
        os.rename(out_dir, old)
        os.rename(tmp, out_dir)
        shutil.rmtree(old)
    else:
        os.rename(tmp, out_dir)
    fd = os.open(parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return out_dir


class TrainingState:
    """A PEFT model's training state in one ftl checkpoint (collective to make: every rank, the
    same model and optimizer). `total_steps` is for the progress line; a checkpoint is started
    every `ckpt_every` steps and when a stop is requested; `keep` committed steps are kept.
    `report_every`: rank 0's progress report (ftl run's line, `ftl report`) every so many steps.
    `check_base`: refuse to resume on frozen weights other than those the checkpoint was made on.

    The registered tensors are borrowed (docs/python.md): do not move the model or rebuild the
    optimizer after this call."""

    def __init__(self, ctx, model, optimizer, total_steps=0, ckpt_every=50, keep=3, report_every=10,
                 check_base=True, timeout_ms=None):
        self.ctx, self.total_steps = ctx, int(total_steps)
        self.ckpt_every, self.report_every = max(1, int(ckpt_every)), max(1, int(report_every))
        self.position = 0  # the data position: the script sets it; saved and restored with the step
        self.stop_reason = ""
        self._last_saved = None
        prime_optimizer(optimizer)
        self._digest = _base_digest(model) if check_base else bytes(32)
        self.ck = ctx.checkpoint(keep=keep, timeout_ms=timeout_ms)
        trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        if not trainable:
            raise ValueError("ftl.hf: the model has no trainable parameters (get_peft_model first)")
        for name, p in trainable:
            self.ck.add(_ck_name("model", name), p.data)
        index = {id(p): i for i, p in enumerate(p for g in optimizer.param_groups for p in g["params"])}
        for _, p in trainable:
            st = optimizer.state.get(p)
            if not st:
                raise ValueError(f"ftl.hf: {type(optimizer).__name__} has no state yet for a trainable "
                                 "parameter (only Adam/AdamW's is made before the first step)")
            for key in sorted(st):
                if not hasattr(st[key], "data_ptr"):
                    raise TypeError(f"ftl.hf: optimizer state {key!r} is not a tensor")
                self.ck.add(_ck_name("optim", f"{index[id(p)]}.{key}"), st[key])
        self._rng = self.ck.add_blob("rng", size=sum(_rng_sizes()), per_rank=True)
        self._global = self.ck.add_blob("hf", size=_GLOBAL_BYTES)

    def restore(self):
        """Collective: loads the newest committed step into the model, the optimizer and the
        generators, and returns it (0 on a fresh start). `position` is the saved data position."""
        step = self.ck.restore()
        if step < 0:
            return 0
        if self._global[_POS.size:].tobytes() != self._digest and any(self._digest):
            raise RuntimeError("ftl.hf: the checkpoint was made on other frozen weights than this model's "
                               "(a different base or seed); refusing to resume on it")
        (self.position,) = _POS.unpack(self._global[:_POS.size].tobytes())
        _rng_unpack(self._rng)
        self._last_saved = step  # committed already: finish() at this step saves nothing
        return step

    def save(self, step):
        """Collective: starts checkpoint `step` (returns once staged; committed in the background)."""
        _rng_pack(self._rng)
        self._global[:] = np.frombuffer(_POS.pack(int(self.position)) + self._digest, dtype=np.uint8)
        self.ck.save(step)
        self._last_saved = step

    def step_end(self, step, loss=None, tokens=0, stop=None, flops=None):
        """Collective, once per finished step: the heartbeat, rank 0's progress report, a
        checkpoint every `ckpt_every` steps, and the stop vote. Returns True when the job is to
        stop (preempted): the step's checkpoint is then committed and the loop should end.
        `stop`: this step's vote already agreed by the script's own collective (from
        `ctx.stop_pending()`); else `ctx.stop_requested()` agrees it (one small collective).
        `flops`: this rank's model FLOPs in the step (`train_flops`), for ftl's MFU; None: none."""
        self.ctx.step_done(step, flops=flops)
        if self.ctx.rank == 0 and loss is not None and (step % self.report_every == 0 or step == 1
                                                         or step == self.total_steps):
            self.ctx.progress_report(step, self.total_steps, float(loss), int(tokens))
        if stop is None:
            stop, self.stop_reason = self.ctx.stop_requested()
        if stop:
            self.save(step)
            self.ck.wait()
            return True
        if step % self.ckpt_every == 0:
            self.save(step)
        return False

    def finish(self, model=None, out_dir=None, step=None):
        """Collective: commits the last step (when `step` is given and not saved yet) and waits for
        the checkpoint; then rank 0 writes the adapter with `export_adapter(model, out_dir)`
        (out_dir: default RUNDIR/final, the run's final adapter, committed for the gate). Returns
        the folder on rank 0, else None."""
        self.ctx.progress_section("checkpoint")  # not a training step: the checkpoint timeout applies
        if step is not None and step != self._last_saved:
            self.save(step)
        self.ck.wait()
        if model is None or self.ctx.rank != 0:
            return None
        return export_adapter(model, out_dir or os.path.join(self.ctx.run_dir or ".", "final"))

    def close(self):
        """Collective: waits for a checkpoint in flight and releases the checkpoint handle."""
        self.ck.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
