"""ftl: the Python binding of ftl's in-rank library (libftl.so), over ctypes.

What a training program started by `ftl run` needs: who this rank is (`Context.rank`, ...),
progress reports (`step_done`), stop requests (`stop_requested`), an allreduce of host arrays,
and sharded asynchronous checkpoints of numpy arrays and torch tensors (`Checkpoint`: register,
`save(step)` returns once the state is staged, `wait()` until committed, `restore()` the newest
committed step that verifies). docs/python.md has the whole story and a complete example.

Not here: torch.distributed (a PyTorch program makes its own process group from the variables
ftl sets: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), and anything of the launcher.

numpy is required; torch is optional and only touched when a tensor is registered.
"""
import ctypes
import ctypes.util
import os
import shutil

import numpy as np

__all__ = ["FtlError", "Context", "Checkpoint", "init", "split_rows", "commit_adapter", "library_path", "SPLIT",
           "REPLICATED"]

SPLIT, REPLICATED = 0, 1  # ftl_ckpt_layout
_HOST, _DEVICE = 0, 1  # ftl_ckpt_mem
_BLOB_GLOBAL, _BLOB_PER_RANK = 0, 1
_ERR_NOTFOUND = 5
_OPS = {"sum": 0, "max": 1, "min": 2, "prod": 3}

# ftl_dtype by numpy dtype name (include/ftl/dtype.h); bfloat16 only exists on the torch side.
_DTYPES = {"float32": 0, "float64": 1, "int32": 2, "int64": 3, "uint8": 4, "float16": 5,
           "bfloat16": 6, "int8": 7, "uint32": 8, "uint64": 9}


class FtlError(RuntimeError):
    """A failed ftl call: `code` is the ftl_err number, `name` its symbol (FTL_ERR_TIMEOUT)."""

    def __init__(self, code, name, message):
        super().__init__(f"{name}: {message}")
        self.code, self.name = code, name


# ---- the library ------------------------------------------------------------------------------

def _candidates():
    env = os.environ.get("FTL_LIBRARY")
    if env:
        return [env]  # named explicitly: nothing else is tried
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    try:  # written by `cmake --install`: the library's path relative to this package
        from . import _install
        out.append(os.path.normpath(os.path.join(here, _install.LIBRARY)))
    except ImportError:
        pass
    bindir = os.environ.get("FTL_BIN_DIR")  # the build tree, as the tests run it
    if bindir:
        out.append(os.path.join(bindir, "..", "lib", "libftl.so"))
    exe = shutil.which("ftl")  # the ftl on PATH: its build tree's or prefix's lib/
    if exe:
        out.append(os.path.join(os.path.dirname(os.path.realpath(exe)), "..", "lib", "libftl.so"))
    found = ctypes.util.find_library("ftl")
    out.append(found or "libftl.so.0")
    return out


def library_path():
    """The libftl the binding loads (FTL_LIBRARY, the installed one, the build tree's, the loader's)."""
    cands = _candidates()
    for c in cands:
        if os.path.sep not in c or os.path.exists(c):
            return c
    return cands[-1]


_lib = None


def _load():
    global _lib
    if _lib is not None:
        return _lib
    # RTLD_GLOBAL: Open MPI's plugins, opened by MPI_Init inside libftl, resolve libmpi's symbols
    # through the global namespace.
    lib = ctypes.CDLL(library_path(), mode=ctypes.RTLD_GLOBAL)
    p, i, i64, sz, s = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_size_t, ctypes.c_char_p
    sigs = {
        "ftl_strerror": (s, [i]), "ftl_err_name": (s, [i]),
        "ftl_init": (i, [p, p, ctypes.POINTER(p)]), "ftl_finalize": (i, [p]),
        "ftl_ctx_info": (ctypes.POINTER(_Info), [p]), "ftl_ctx_errmsg": (s, [p]),
        "ftl_allreduce": (i, [p, p, p, sz, i, i]), "ftl_barrier": (i, [p, i]),
        "ftl_step_done": (i, [p, i64]), "ftl_step_done_flops": (i, [p, i64, ctypes.c_double]),
        "ftl_progress_report": (i, [p, i64, i64, ctypes.c_double, i64]),
        "ftl_stop_requested": (i, [p, ctypes.POINTER(i), ctypes.POINTER(s)]),
        "ftl_stop_pending": (i, [p, ctypes.POINTER(s)]),
        "ftl_progress_section": (i, [p, s]), "ftl_ctx_emit_event": (i, [p, s, s]),
        "ftl_ckpt_options_init": (None, [p]),
        "ftl_ckpt_create": (i, [p, p, ctypes.POINTER(p)]), "ftl_ckpt_destroy": (i, [p]),
        "ftl_ckpt_add_tensor": (i, [p, s, p, i, i, ctypes.POINTER(i64), i, i]),
        "ftl_ckpt_add_blob": (i, [p, s, p, sz, i]),
        "ftl_ckpt_split_rows": (None, [i64, i, i, ctypes.POINTER(i64), ctypes.POINTER(i64)]),
        "ftl_ckpt_prepare": (i, [p]), "ftl_ckpt_save": (i, [p, i64]), "ftl_ckpt_save_level": (i, [p, i64, i]),
        "ftl_ckpt_levels": (ctypes.c_uint, [p]),
        "ftl_ckpt_wait": (i, [p, i64, p]), "ftl_ckpt_in_flight": (i, [p]),
        "ftl_ckpt_restore": (i, [p, p]), "ftl_ckpt_errmsg": (s, [p]), "ftl_ckpt_dir": (s, [p]),
        "ftl_adapter_commit": (i, [s, ctypes.POINTER(s), sz, ctypes.POINTER(_Diag)]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    _lib = lib
    return lib


class _Diag(ctypes.Structure):  # ftl_diag (include/ftl/error.h)
    _fields_ = [("msg", ctypes.c_char * 1024)]


class _Info(ctypes.Structure):  # ftl_info (include/ftl/rdzv.h)
    _fields_ = [("rank", ctypes.c_int), ("world_size", ctypes.c_int), ("local_rank", ctypes.c_int),
                ("local_world_size", ctypes.c_int), ("device", ctypes.c_int), ("backend", ctypes.c_int),
                ("attempt", ctypes.c_int), ("under_launcher", ctypes.c_int), ("run_dir", ctypes.c_char_p),
                ("host", ctypes.c_char_p)]


# The option, statistics and restore structs end in spare room, so fields a newer header appends
# (ftl_ckpt_options_init writes their defaults) land in memory this binding owns.
class _Options(ctypes.Structure):  # ftl_ckpt_options (include/ftl/ckpt.h)
    _fields_ = [("run_dir", ctypes.c_char_p), ("keep", ctypes.c_int), ("timeout_ms", ctypes.c_int64),
                ("chunk_bytes", ctypes.c_size_t), ("allow_fresh", ctypes.c_int), ("_spare", ctypes.c_char * 256)]


class _Stats(ctypes.Structure):  # ftl_ckpt_stats
    _fields_ = [("step", ctypes.c_int64), ("err", ctypes.c_int), ("errmsg", ctypes.c_char * 512),
                ("stall_ms", ctypes.c_double), ("wait_prev_ms", ctypes.c_double),
                ("durable_ms", ctypes.c_double), ("shard_bytes", ctypes.c_uint64),
                ("total_bytes", ctypes.c_uint64), ("level", ctypes.c_int), ("_spare", ctypes.c_char * 256)]


class _RestoreInfo(ctypes.Structure):  # ftl_ckpt_restore_info
    _fields_ = [("step", ctypes.c_int64), ("written_world_size", ctypes.c_int),
                ("committed_found", ctypes.c_int), ("bad_steps", ctypes.c_int),
                ("per_rank_blobs_missing", ctypes.c_int), ("restore_ms", ctypes.c_double),
                ("errmsg", ctypes.c_char * 1024), ("_spare", ctypes.c_char * 256)]


def _check(rc, detail=""):
    if rc != 0:
        lib = _load()
        raise FtlError(rc, lib.ftl_err_name(rc).decode(), detail or lib.ftl_strerror(rc).decode())


def _text(b):
    return b.decode(errors="replace") if b else ""


# ---- arrays and tensors -----------------------------------------------------------------------

def _describe(obj):
    """(address, ftl dtype, shape, mem, keep-alive) of a C-contiguous numpy array or torch tensor."""
    if isinstance(obj, np.ndarray):
        if not obj.flags["C_CONTIGUOUS"] or not obj.flags["WRITEABLE"]:
            raise ValueError("ftl: a registered numpy array must be C-contiguous and writeable")
        name = obj.dtype.name
        if name not in _DTYPES or name == "bfloat16":
            raise ValueError(f"ftl: numpy dtype {name} has no ftl dtype")
        return obj.ctypes.data, _DTYPES[name], tuple(obj.shape), _HOST, obj
    if type(obj).__module__.startswith("torch"):
        if not obj.is_contiguous():
            raise ValueError("ftl: a registered tensor must be contiguous")
        name = str(obj.dtype).replace("torch.", "")
        if name not in _DTYPES:
            raise ValueError(f"ftl: tensor dtype {name} has no ftl dtype")
        # CUDA tensors take ftl's device path (staged through pinned memory); a build of ftl
        # without CUDA answers FTL_ERR_UNSUPPORTED.
        mem = _DEVICE if obj.is_cuda else _HOST
        return obj.data_ptr(), _DTYPES[name], tuple(obj.shape), mem, obj
    raise TypeError(f"ftl: cannot register a {type(obj).__name__} (numpy arrays and torch tensors only)")


# ---- the gang ---------------------------------------------------------------------------------

class Context:
    """This rank in the gang (ftl_init). Use `ftl.init()`; `finalize()` (or `with`) at the end."""

    def __init__(self):
        lib = _load()
        self._ctx = ctypes.c_void_p()
        rc = lib.ftl_init(None, None, ctypes.byref(self._ctx))
        if rc != 0:
            msg = _text(lib.ftl_ctx_errmsg(self._ctx)) if self._ctx else ""
            if self._ctx:
                lib.ftl_finalize(self._ctx)
                self._ctx = None
            _check(rc, msg)
        info = lib.ftl_ctx_info(self._ctx).contents
        self.rank, self.world_size = info.rank, info.world_size
        self.local_rank, self.local_world_size = info.local_rank, info.local_world_size
        self.device, self.attempt = info.device, info.attempt
        self.backend = "nccl" if info.backend == 1 else "mpi"
        self.under_launcher = bool(info.under_launcher)
        self.run_dir = _text(info.run_dir) or None
        self.host = _text(info.host)

    def _live(self):
        if not self._ctx:
            raise FtlError(13, "FTL_ERR_STATE", "the context was finalized")
        return self._ctx

    def _call(self, rc):
        _check(rc, _text(_load().ftl_ctx_errmsg(self._ctx)))

    def step_done(self, step, flops=None):
        """Not collective: this rank finished training step `step` (the launcher's heartbeat). flops:
        the model FLOPs this rank did in that step (its share of the forward and backward passes, 2
        per multiply-add), for ftl's model FLOPs utilisation (docs/gpu.md, "Useful work: MFU"); None
        reports none. A negative, NaN or infinite flops raises FtlError (FTL_ERR_INVAL)."""
        if flops is None:
            self._call(_load().ftl_step_done(self._live(), int(step)))
        else:
            self._call(_load().ftl_step_done_flops(self._live(), int(step), float(flops)))

    def progress_report(self, step, total_steps=0, loss=float("nan"), tokens=0):
        """Not collective (only rank 0's reports are used): where training stands, for `ftl run`'s
        progress line, the `progress` events (`ftl report`) and the metrics textfile."""
        self._call(_load().ftl_progress_report(self._live(), int(step), int(total_steps), float(loss), int(tokens)))

    def stop_requested(self):
        """Collective: (True, reason) on every rank when the launcher asked the job to stop."""
        flag, reason = ctypes.c_int(0), ctypes.c_char_p()
        self._call(_load().ftl_stop_requested(self._live(), ctypes.byref(flag), ctypes.byref(reason)))
        return bool(flag.value), _text(reason.value)

    def stop_pending(self):
        """Not collective: whether this rank has heard a stop request (fold it into your own
        collective to agree, as ftl_stop_pending in C)."""
        reason = ctypes.c_char_p()
        return bool(_load().ftl_stop_pending(self._live(), ctypes.byref(reason)))

    def progress_section(self, section):
        """Not collective: "step" or "checkpoint", for the launcher's hang detector."""
        self._call(_load().ftl_progress_section(self._live(), section.encode()))

    def emit_event(self, event, fields_json=None):
        self._call(_load().ftl_ctx_emit_event(self._live(), event.encode(),
                                              fields_json.encode() if fields_json else None))

    def allreduce(self, array, op="sum"):
        """Collective: in place over a C-contiguous host numpy array (CPU path)."""
        addr, dtype, shape, mem, _ = _describe(array)
        if mem != _HOST:
            raise ValueError("ftl: allreduce takes host arrays")
        self._call(_load().ftl_allreduce(self._live(), addr, addr, int(np.prod(shape, dtype=np.int64)),
                                         dtype, _OPS[op]))
        return array

    def barrier(self, timeout_ms=60000):
        self._call(_load().ftl_barrier(self._live(), int(timeout_ms)))

    def checkpoint(self, run_dir=None, keep=None, timeout_ms=None, allow_fresh=False):
        """Collective: a Checkpoint on this gang (ftl_ckpt_create)."""
        return Checkpoint(self, run_dir=run_dir, keep=keep, timeout_ms=timeout_ms, allow_fresh=allow_fresh)

    def finalize(self):
        """Not collective: leaves the gang and finalizes MPI. Safe to call twice."""
        if self._ctx:
            rc = _load().ftl_finalize(self._ctx)
            self._ctx = None
            _check(rc)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.finalize()


def init():
    """Collective: joins the gang (ftl_init) and returns its Context."""
    return Context()


def split_rows(rows, rank, world_size):
    """The [start, start + count) rows of `rows` that rank `rank` owns under SPLIT."""
    start, count = ctypes.c_int64(), ctypes.c_int64()
    _load().ftl_ckpt_split_rows(int(rows), int(rank), int(world_size), ctypes.byref(start), ctypes.byref(count))
    return start.value, count.value


def commit_adapter(folder, names):
    """Writes FOLDER/COMMIT (ftl_adapter_commit, include/ftl/adapter.h): the final adapter's commit
    marker over the files `names` (bare names in FOLDER, already written and fsynced), so the gate
    and `ftl publish` take the folder as a whole adapter. Not collective: call it on one rank."""
    enc = [n.encode() for n in names]
    arr = (ctypes.c_char_p * max(1, len(enc)))(*enc)
    diag = _Diag()
    rc = _load().ftl_adapter_commit(os.fsencode(folder), arr, len(enc), ctypes.byref(diag))
    _check(rc, _text(diag.msg))


# ---- checkpoints ------------------------------------------------------------------------------

class Checkpoint:
    """Sharded asynchronous checkpoints (include/ftl/ckpt.h, docs/checkpoint.md).

    Register the state once (`add` for arrays and tensors, `add_blob` for small byte buffers),
    in the same order on every rank. The registered memory is borrowed: it must keep its address
    (update it in place: `a[...] = ...`, `tensor.copy_()`, an optimizer's in-place step) until
    `close()`. The binding holds a reference to each, so they stay alive.
    """

    def __init__(self, ctx, run_dir=None, keep=None, timeout_ms=None, allow_fresh=False):
        lib = _load()
        self._ctx, self._ck, self._keep = ctx, ctypes.c_void_p(), []
        opts = _Options()
        lib.ftl_ckpt_options_init(ctypes.byref(opts))
        self._run_dir = run_dir.encode() if run_dir else None  # borrowed by ftl for the call
        opts.run_dir = self._run_dir
        if keep is not None:
            opts.keep = int(keep)
        if timeout_ms is not None:
            opts.timeout_ms = int(timeout_ms)
        if allow_fresh:
            opts.allow_fresh = 1
        rc = lib.ftl_ckpt_create(ctx._live(), ctypes.byref(opts), ctypes.byref(self._ck))
        _check(rc, _text(lib.ftl_ctx_errmsg(ctx._ctx)))
        self.last_stats = None
        self.restore_info = None

    def _live(self):
        if not self._ck:
            raise FtlError(13, "FTL_ERR_STATE", "the checkpoint was closed")
        return self._ck

    def _call(self, rc):
        _check(rc, _text(_load().ftl_ckpt_errmsg(self._ck)) if self._ck else "")

    def add(self, name, obj, layout=REPLICATED, global_shape=None):
        """Registers a numpy array or torch tensor. REPLICATED: the whole tensor on every rank.
        SPLIT: this rank's rows of a tensor of global_shape (split_rows says which)."""
        addr, dtype, shape, mem, keep = _describe(obj)
        gshape = tuple(global_shape) if global_shape is not None else shape
        dims = (ctypes.c_int64 * max(1, len(gshape)))(*gshape)
        self._call(_load().ftl_ckpt_add_tensor(self._live(), name.encode(), addr, dtype, len(gshape), dims,
                                               int(layout), mem))
        self._keep.append(keep)
        return obj

    def add_blob(self, name, size=None, buffer=None, per_rank=False):
        """Registers a small host byte buffer (a numpy uint8 array; one of `size` bytes is made
        when not given) and returns it: write the state into it before save, read it after restore
        (RNG states, a data cursor). per_rank: each rank's own bytes, else rank 0's for all."""
        if buffer is None:
            buffer = np.zeros(int(size), dtype=np.uint8)
        if not isinstance(buffer, np.ndarray) or not buffer.flags["C_CONTIGUOUS"]:
            raise TypeError("ftl: a blob is a C-contiguous numpy array")
        self._call(_load().ftl_ckpt_add_blob(self._live(), name.encode(), buffer.ctypes.data, buffer.nbytes,
                                             _BLOB_PER_RANK if per_rank else _BLOB_GLOBAL))
        self._keep.append(buffer)
        return buffer

    def prepare(self):
        self._call(_load().ftl_ckpt_prepare(self._live()))

    def save(self, step, level=3):
        """Collective: starts checkpoint `step` and returns once the state is staged (the
        registered memory may change right away); the writer thread commits it. level 1 or 2
        (ftl_ckpt_save_level): only in the hosts' memory (L1; L2 also on a partner host), not in
        the run directory; 3 (the default): in the run directory."""
        if int(level) == 3:
            self._call(_load().ftl_ckpt_save(self._live(), int(step)))
        else:
            self._call(_load().ftl_ckpt_save_level(self._live(), int(step), int(level)))

    def levels(self):
        """Not collective: the levels (1, 2, 3) this handle saves at, as every rank agreed when it
        was made (ftl_ckpt_levels): 3 always, 1 when every rank has an L1 folder, 2 with it when
        L2 is on. What a program's own checkpoint cadence should plan with."""
        bits = _load().ftl_ckpt_levels(self._live())
        return [level for level in (1, 2, 3) if bits & (1 << (level - 1))]

    def in_flight(self):
        return bool(_load().ftl_ckpt_in_flight(self._live()))

    def wait(self, timeout_ms=-1):
        """Not collective: until no checkpoint is in flight; returns the last one's statistics
        (a dict) and raises FtlError when it was abandoned. With nothing ever saved (a rerun that
        restored its last step) nothing is pending: the statistics say step -1."""
        st = _Stats()
        rc = _load().ftl_ckpt_wait(self._live(), int(timeout_ms), ctypes.byref(st))
        stats = {"step": st.step, "stall_ms": st.stall_ms, "wait_prev_ms": st.wait_prev_ms,
                 "durable_ms": st.durable_ms, "shard_bytes": st.shard_bytes, "total_bytes": st.total_bytes,
                 "level": st.level}
        self.last_stats = stats
        if rc != 0:
            _check(rc, _text(st.errmsg) or _text(_load().ftl_ckpt_errmsg(self._ck)))
        return stats

    def restore(self):
        """Collective: loads the newest committed step that verifies into the registered memory
        and returns it; -1 on a fresh start (nothing was committed). Raises FtlError otherwise
        (FTL_ERR_CORRUPT: steps were committed but none loads; never a silent fresh start)."""
        info = _RestoreInfo()
        rc = _load().ftl_ckpt_restore(self._live(), ctypes.byref(info))
        self.restore_info = {"step": info.step, "written_world_size": info.written_world_size,
                             "committed_found": info.committed_found, "bad_steps": info.bad_steps,
                             "restore_ms": info.restore_ms}
        if rc == _ERR_NOTFOUND:
            return -1
        if rc != 0:
            _check(rc, _text(info.errmsg) or _text(_load().ftl_ckpt_errmsg(self._ck)))
        return info.step

    @property
    def directory(self):
        return _text(_load().ftl_ckpt_dir(self._live()))

    def close(self):
        """Collective: waits for a checkpoint in flight and destroys the handle."""
        if self._ck:
            rc = _load().ftl_ckpt_destroy(self._ck)
            self._ck = None
            self._keep = []
            _check(rc)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
