"""ftl.hf_trainer: transformers' Trainer under ftl (re-exported by ftl.hf: use `ftl.hf.trainer_init`,
`ftl.hf.train`). A Trainer script changes two lines:

    ctx = ftl.hf.trainer_init()    # after the imports, BEFORE TrainingArguments(...): None outside ftl
    ...                            # TrainingArguments, the model, Trainer(...) as before
    ftl.hf.train(trainer)          # instead of trainer.train()

Why two lines and not a callback alone. `trainer_init` is where ftl's warm-restart standby parks
(inside `ftl.init()`), so it must come after the imports and before anything forms torch's process
group (TrainingArguments' device set-up does, through accelerate); it also forms that group from
ftl's variables (gloo by default) so accelerate finds it made. `train` replaces `trainer.train()`
because a callback cannot resume a run exactly: Trainer works out which epoch and batch to go on
from, and when to set the generators back, from the folder given to
`train(resume_from_checkpoint=...)` before any callback runs. So `train` restores ftl's newest
committed step, writes it out as a Trainer checkpoint folder (the trainable weights with
save_pretrained, optimizer.pt, scheduler.pt, rng_state_R.pth, trainer_state.json) and hands that to
`trainer.train()`: Trainer's own resume path then skips the batches already seen and sets the RNGs
at its own point, and the run goes on as an unbroken one would (the same adapter bytes). The
callback it adds (`FtlTrainerCallback`) does the per-step work: the heartbeat (`ctx.step_done`,
with the step's model FLOPs for ftl's MFU, counted by `ftl.hf.train_flops` per micro-batch),
rank 0's progress report, ftl's checkpoints at Trainer's `save_steps` (the trainable weights and the
optimizer's state as tensors; the scheduler, the optimizer's hyper-parameters and TrainerState as
JSON in a global blob; each rank's CPU generators in a per-rank blob), which replace Trainer's own
saves (`control.should_save` is turned off), and the stop vote: a stop request (preemption)
commits the step and stops Trainer (`control.should_training_stop`); `train` then ends the process
with exit status 0, and `ftl run` exits 75. At the normal end it commits the last step and rank 0
writes the adapter to RUNDIR/final with `ftl.hf.export_adapter` (committed for the gate).

Outside ftl (no FTL_RDZV_ADDR: torchrun, plain python) both are inert: `trainer_init` returns None
and `train(trainer, **kw)` is `trainer.train(**kw)`, Trainer's own checkpoints included.

Limits: the optimizer must be torch's Adam or AdamW (Trainer's default, `optim="adamw_torch"`): its
state is made before the first step so it can be registered; CUDA generators are not checkpointed
(as in ftl.hf.TrainingState); DeepSpeed and FSDP keep their own checkpoints and are refused.
"""
import atexit
import dataclasses
import json
import os
import re
import shutil
import struct
import sys

import numpy as np
import torch
from transformers import TrainerCallback

import ftl
from ftl import hf as _hf

__all__ = ["under_ftl", "trainer_init", "train", "FtlTrainerCallback"]

# The pinned stack (docs/python.md): accelerate 0.34's multi-process CPU set-up calls
# torch.cpu.device_count() and torch.cpu.set_device(), which torch 2 added and Debian's torch 1.13
# lacks; torch 2's are `return 1` and a no-op. Without them TrainingArguments fails on 2 CPU ranks,
# under ftl and torchrun alike. Only missing names are added.
if not hasattr(torch.cpu, "device_count"):
    torch.cpu.device_count = lambda: 1
if not hasattr(torch.cpu, "set_device"):
    torch.cpu.set_device = lambda device: None
    # The device accelerate then names, torch.device("cpu", N), is what Trainer's resume passes to
    # torch.load as map_location, and torch 1.13 knows how to load onto "cpu" only.
    torch.serialization.register_package(
        11, lambda obj: None, lambda obj, location: obj if re.fullmatch(r"cpu:\d+", location) else None)

_JSON_BLOB_BYTES = 256 * 1024  # the global blob: length, then JSON (TrainerState, scheduler, groups)
_LEN = struct.Struct("<q")
_ctx = None  # this process's gang, from trainer_init


def under_ftl():
    """Whether this process was started by `ftl run` (its rendezvous address is set)."""
    return bool(os.environ.get("FTL_RDZV_ADDR"))


def _finalize_at_exit():
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    if _ctx is not None:
        _ctx.finalize()


def trainer_init(backend="gloo"):
    """Under `ftl run`: joins the gang (`ftl.init()`, where a standby parks until it takes over)
    and forms torch's process group from it with `backend`; returns the Context. Outside ftl:
    returns None and does nothing. Call it after the script's imports and argument parsing and
    BEFORE `TrainingArguments(...)` (whose device set-up forms the process group through
    accelerate) or anything that writes files. The gang is left at the interpreter's exit."""
    global _ctx
    if not under_ftl():
        return None
    if _ctx is not None:
        return _ctx
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        raise RuntimeError("ftl.hf.trainer_init(): torch's process group is already formed (TrainingArguments(...) "
                           "or init_process_group ran first); call trainer_init() after the imports and before "
                           "TrainingArguments, so that ftl's standby parks before it and the group is ftl's gang")
    ctx = ftl.init()
    _hf.init_process_group(ctx, backend)
    _ctx = ctx
    atexit.register(_finalize_at_exit)
    return ctx


def _json_ready(obj, what):
    """obj as JSON would give it back, or a clear error naming what could not be saved."""
    try:
        return json.loads(json.dumps(obj))
    except (TypeError, ValueError) as e:
        raise TypeError(f"ftl.hf.train: {what} cannot be checkpointed as JSON ({e})") from None


def _group_hyperparams(optimizer):
    return [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]


def _lower_level(levels):
    """The cheapest level below 3 the checkpoint handle keeps (2 when L2 is on, else 1), or 3."""
    below = [level for level in levels if level < 3]
    return max(below) if below else 3


class FtlTrainerCallback(TrainerCallback):
    """The per-step side of `ftl.hf.train`, which makes and adds it (the restore has to happen
    before `trainer.train()`, so adding this callback by hand would not resume anything): on each
    optimizer step (on_step_end) the heartbeat, rank 0's progress report, ftl's checkpoint when one
    is due (Trainer's own saves turned off) and the stop vote; the loss from Trainer's logs."""

    def __init__(self, run):
        self.run = run

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.run.last_loss = float(logs["loss"])

    def on_step_end(self, args, state, control, **kwargs):
        self.run.step_end(state, control, kwargs.get("lr_scheduler"))
        return control


class _TrainerRun:
    """One `train` call under ftl: the checkpoint registered over the trainer's objects."""

    def __init__(self, ctx, trainer, ckpt_every, l3_every, keep, report_every, check_base, timeout_ms):
        args = trainer.args
        if getattr(trainer, "is_deepspeed_enabled", False) or getattr(trainer, "is_fsdp_enabled", False):
            raise ValueError("ftl.hf.train: DeepSpeed and FSDP keep their own checkpoints; not covered")
        if ckpt_every is None:
            save_steps = getattr(args, "save_steps", 0) or 0
            strategy = getattr(args, "save_strategy", "no")
            by_steps = getattr(strategy, "value", strategy) == "steps"  # an IntervalStrategy, or its text
            if by_steps and save_steps >= 1:
                ckpt_every = int(save_steps)  # Trainer's interval, now ftl's
            elif by_steps:
                raise ValueError(f"ftl.hf.train: TrainingArguments.save_steps={save_steps} is a ratio; "
                                 "pass ckpt_every=N (steps)")
            else:
                ckpt_every = 50
        if int(ckpt_every) < 1:
            raise ValueError(f"ftl.hf.train: ckpt_every={ckpt_every} must be at least 1")
        if int(l3_every) < 1:
            raise ValueError(f"ftl.hf.train: l3_every={l3_every} must be at least 1")
        self.ctx, self.trainer = ctx, trainer
        self.ckpt_every, self.l3_every, self.report_every = int(ckpt_every), int(l3_every), max(1, int(report_every))
        self.last_loss = float("nan")
        self.stop_reason = None
        self.saved = 0  # checkpoints started by this process: every l3_every-th goes to L3
        self.last_saved = None
        model = trainer.model
        # The optimizer Trainer would make at train() (it keeps one that exists), made now so its
        # state can be registered; accelerate's prepare() copies that state into new tensors, so
        # these stay ftl's: copied from the live optimizer at each save, loaded into it by Trainer
        # from optimizer.pt on a resume.
        optimizer = trainer.create_optimizer()
        inner = getattr(optimizer, "optimizer", optimizer)
        if not isinstance(inner, (torch.optim.Adam, torch.optim.AdamW)):
            raise ValueError(f"ftl.hf.train: the optimizer is {type(inner).__name__}; only torch.optim.Adam/AdamW "
                             "(TrainingArguments optim='adamw_torch', Trainer's default) can be checkpointed by ftl")
        _hf.prime_optimizer(inner)
        self.optimizer = inner
        self.digest = _hf._base_digest(model) if check_base else bytes(32)
        self.ck = ctx.checkpoint(keep=keep, timeout_ms=timeout_ms)
        trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        if not trainable:
            raise ValueError("ftl.hf.train: the model has no trainable parameters (get_peft_model first)")
        # Registered: each parameter's tensor as it is now, restored in place before train().
        # accelerate's prepare() may give a parameter new storage (model.to() onto "cpu:0" copies),
        # so each save copies the live parameter in when it is no longer the registered one.
        self.param_slots = []
        for name, p in trainable:
            self.param_slots.append((p, self.ck.add(_hf._ck_name("model", name), p.data)))
        self.opt_slots = []  # (index in the optimizer's parameter order, key, registered tensor)
        for i, p in enumerate(p for g in inner.param_groups for p in g["params"]):
            for key in sorted(inner.state.get(p, {})):
                t = inner.state[p][key]
                if not hasattr(t, "data_ptr"):
                    raise TypeError(f"ftl.hf.train: optimizer state {key!r} is not a tensor")
                self.ck.add(_hf._ck_name("optim", f"{i}.{key}"), t)
                self.opt_slots.append((i, key, t))
        self.rng = self.ck.add_blob("rng", size=sum(_hf._rng_sizes()), per_rank=True)
        self.blob = self.ck.add_blob("trainer", size=_JSON_BLOB_BYTES)
        self.levels = self.ck.levels()
        self.flops_pending = 0.0
        self._count_flops(trainer)

    def _count_flops(self, trainer):
        """This rank's model FLOPs of each optimizer step, for its heartbeat (ctx.step_done's flops:
        ftl's MFU, docs/gpu.md). Trainer asks its floating_point_ops(inputs) once per micro-batch
        for its own total_flos; that call is wrapped to add the micro-batch's FLOPs by
        ftl.hf.train_flops (a frozen weight costs 4 a token, a trained one 6: Trainer's estimate, 6
        per parameter, counts the gradients a LoRA run never computes) and returns Trainer's own
        figure unchanged. Inputs without a 2-d main input (input_ids) add nothing. The model is
        walked once, here: which weights train is fixed from now on (the checkpoint registered them)."""
        counted = trainer.floating_point_ops
        main = getattr(trainer.model, "main_input_name", "input_ids")
        terms = _hf._flops_terms(trainer.model)

        def floating_point_ops(inputs):
            ids = inputs.get(main) if hasattr(inputs, "get") else None
            if ids is not None and hasattr(ids, "shape") and len(ids.shape) == 2:
                self.flops_pending += _hf._flops_of(terms, ids.shape[0], ids.shape[1])
            return counted(inputs)

        trainer.floating_point_ops = floating_point_ops

    # ---- saving --------------------------------------------------------------------------------

    def _state_json(self, state, scheduler, live_opt):
        doc = {"base_digest": self.digest.hex(),
               "scheduler": _json_ready(scheduler.state_dict(), f"the LR scheduler ({type(scheduler).__name__})")
               if scheduler is not None else None,
               "param_groups": _json_ready(_group_hyperparams(live_opt), "the optimizer's param_groups"),
               "trainer_state": _json_ready(dataclasses.asdict(state), "TrainerState")}
        raw = json.dumps(doc, sort_keys=True).encode()
        # log_history grows with the run and only informs: the oldest entries go when it must fit.
        history = doc["trainer_state"].get("log_history") or []
        while _LEN.size + len(raw) > _JSON_BLOB_BYTES and history:
            del history[:max(1, len(history) // 4)]
            raw = json.dumps(doc, sort_keys=True).encode()
        if _LEN.size + len(raw) > _JSON_BLOB_BYTES:
            raise ValueError(f"ftl.hf.train: the trainer's state is {len(raw)} bytes of JSON, more than "
                             f"{_JSON_BLOB_BYTES - _LEN.size}")
        return raw

    def save(self, step, state, scheduler, level=3):
        """Collective: copies the live training state into the registered memory and starts
        checkpoint `step` at `level` (committed in the background)."""
        live_opt = getattr(self.trainer.optimizer, "optimizer", self.trainer.optimizer) or self.optimizer
        for p, t in self.param_slots:
            if p.data.data_ptr() != t.data_ptr():
                t.copy_(p.data)
        params = [p for g in live_opt.param_groups for p in g["params"]]
        for i, key, t in self.opt_slots:
            live = live_opt.state[params[i]][key]
            if live is not t:
                t.copy_(live)
        raw = self._state_json(state, scheduler, live_opt)
        self.blob[:] = 0
        self.blob[:_LEN.size + len(raw)] = np.frombuffer(_LEN.pack(len(raw)) + raw, dtype=np.uint8)
        _hf._rng_pack(self.rng)
        self.ck.save(step, level)
        self.last_saved = step

    def step_end(self, state, control, scheduler):
        """Once per optimizer step (on_step_end): heartbeat, progress, checkpoint, stop vote."""
        step = state.global_step
        flops, self.flops_pending = self.flops_pending, 0.0
        self.ctx.step_done(step, flops=flops if flops > 0 else None)
        if self.ctx.rank == 0 and (step % self.report_every == 0 or step == 1 or step == state.max_steps):
            self.ctx.progress_report(step, state.max_steps, self.last_loss, 0)
        control.should_save = False  # Trainer's own checkpoints: ftl's replace them
        stop, reason = self.ctx.stop_requested()
        if stop:
            self.save(step, state, scheduler)
            self.ck.wait()
            self.stop_reason = reason or "stop requested"
            control.should_training_stop = True
        elif step % self.ckpt_every == 0 and step != state.max_steps:  # the last one: train() commits it
            self.saved += 1
            level = 3 if (self.saved - 1) % self.l3_every == 0 else _lower_level(self.levels)
            self.save(step, state, scheduler, level)

    # ---- restoring -----------------------------------------------------------------------------

    def restore(self):
        """Collective: the newest committed step, written out as a Trainer checkpoint folder for
        this rank; (step, folder), or (-1, None) on a fresh start."""
        step = self.ck.restore()
        if step < 0:
            return -1, None
        (n,) = _LEN.unpack(self.blob[:_LEN.size].tobytes())
        doc = json.loads(self.blob[_LEN.size:_LEN.size + n].tobytes())
        if any(self.digest) and doc["base_digest"] != self.digest.hex():
            raise RuntimeError("ftl.hf.train: the checkpoint was made on other frozen weights than this model's "
                               "(a different base or seed); refusing to resume on it")
        self.last_saved = step
        args = self.trainer.args
        folder = os.path.join(self.ctx.run_dir or ".", "trainer-resume", f"rank-{self.ctx.rank}", f"checkpoint-{step}")
        shutil.rmtree(os.path.dirname(folder), ignore_errors=True)  # an earlier attempt's
        os.makedirs(folder)
        # The trainable weights ftl restored in place, as Trainer reads them back (it insists on them).
        self.trainer.model.save_pretrained(folder, safe_serialization=True)
        opt_state = self.optimizer.state_dict()  # the registered tensors, restored in place
        for group, saved in zip(opt_state["param_groups"], doc["param_groups"]):
            for key, value in saved.items():
                group[key] = tuple(value) if isinstance(group.get(key), tuple) else value
        torch.save(opt_state, os.path.join(folder, "optimizer.pt"))
        if doc["scheduler"] is not None:
            torch.save(doc["scheduler"], os.path.join(folder, "scheduler.pt"))
        torch_state, numpy_state, python_state = _hf._rng_decode(self.rng)
        rng = {"python": python_state, "numpy": numpy_state, "cpu": torch_state}
        if torch.cuda.is_available():  # Trainer reads the key; CUDA generators are not checkpointed
            rng["cuda"] = torch.cuda.random.get_rng_state_all()
        name = f"rng_state_{args.process_index}.pth" if args.world_size > 1 else "rng_state.pth"
        torch.save(rng, os.path.join(folder, name))
        with open(os.path.join(folder, "trainer_state.json"), "w") as f:
            json.dump(doc["trainer_state"], f, indent=2, sort_keys=True)
        return step, folder

    def finish(self, step, state, scheduler, export, out_dir):
        """Collective: commits `step` (L3) unless it is committed, waits; rank 0 exports the adapter."""
        self.ctx.progress_section("checkpoint")  # not a training step: the checkpoint timeout applies
        if step != self.last_saved:
            self.save(step, state, scheduler)
        self.ck.wait()
        if export and self.ctx.rank == 0:
            return _hf.export_adapter(self.trainer.model, out_dir or os.path.join(self.ctx.run_dir or ".", "final"))
        return None


def _max_steps(trainer):
    """The step Trainer stops at (TrainingArguments.max_steps, or the epochs' worth of updates)."""
    import math

    args = trainer.args
    if args.max_steps > 0:
        return args.max_steps
    per_epoch = max(len(trainer.get_train_dataloader()) // args.gradient_accumulation_steps, 1)
    return math.ceil(args.num_train_epochs * per_epoch)


def train(trainer, *, resume_from_checkpoint=None, ckpt_every=None, l3_every=4, keep=3, report_every=10,
          export=True, out_dir=None, check_base=True, timeout_ms=None, **train_kwargs):
    """`trainer.train()` under ftl (see the module's docstring); outside ftl exactly
    `trainer.train(resume_from_checkpoint=..., **train_kwargs)`.

    Under ftl: restores ftl's newest committed step (if any) through Trainer's own resume path;
    checkpoints every `ckpt_every` steps (default: TrainingArguments.save_steps under
    save_strategy "steps", else 50), the first and every `l3_every`-th after it to the run directory (L3) and the
    others to the hosts' memory (L1, or L2 when on) where the job keeps those levels; `keep` L3
    steps are kept. A stop request commits the step and ends the process with status 0 (`ftl run`
    exits 75): nothing after this call runs. At the end the last step is committed and rank 0
    writes the adapter with `export_adapter` to `out_dir` (default RUNDIR/final, committed for the
    gate) unless `export` is False. `resume_from_checkpoint` (a Trainer checkpoint folder) is used
    only when ftl has committed nothing yet. Returns trainer.train()'s TrainOutput (None when the
    restored step was the last: nothing was left to train)."""
    if _ctx is None:
        if under_ftl():
            raise RuntimeError("ftl.hf.train: under ftl, call ftl.hf.trainer_init() after the imports and before "
                               "TrainingArguments(...) first (the standby parks there; docs/python.md)")
        return trainer.train(resume_from_checkpoint=resume_from_checkpoint, **train_kwargs)
    run = _TrainerRun(_ctx, trainer, ckpt_every, l3_every, keep, report_every, check_base, timeout_ms)
    callback = FtlTrainerCallback(run)
    trainer.add_callback(callback)
    try:
        step, folder = run.restore()
        if step >= 0:
            print(f"rank {_ctx.rank}: resumed from ftl checkpoint {step} (attempt {_ctx.attempt})", flush=True)
            resume_from_checkpoint = folder
        output = None
        if step < 0 or step < _max_steps(trainer):
            output = trainer.train(resume_from_checkpoint=resume_from_checkpoint, **train_kwargs)
        if folder:  # read by Trainer at its start and at the first batch: no longer needed
            shutil.rmtree(os.path.dirname(folder), ignore_errors=True)
            try:
                os.rmdir(os.path.dirname(os.path.dirname(folder)))  # the last rank out removes trainer-resume/
            except OSError:
                pass
        if run.stop_reason is not None:
            print(f"rank {_ctx.rank}: {run.stop_reason}: checkpoint {trainer.state.global_step} committed, exiting",
                  flush=True)
            run.ck.close()
            sys.exit(0)  # ftl run exits 75: the requeued job resumes from the commit
        final_step = trainer.state.global_step if output is not None else step
        run.finish(final_step, trainer.state, trainer.lr_scheduler, export, out_dir)
        run.ck.close()
        return output
    finally:
        trainer.remove_callback(callback)
