#!/usr/bin/python3
# tests/python/ckpt_numpy.py: the Python binding under `ftl run -n 2` (tests/python/binding.sh):
# rank information, an allreduce, progress, a stop check, and a checkpoint of numpy arrays (a
# replicated float64 array, this rank's rows of a split int32 tensor, a 0-d float32, a per-rank
# blob) saved asynchronously, committed, scribbled over and restored bit for bit. Prints
# "binding ok" per rank.
import os
import sys

sys.path.insert(0, os.path.join(os.environ["FTL_SOURCE_DIR"], "python"))
import numpy as np  # noqa: E402

import ftl  # noqa: E402


def main():
    ctx = ftl.init()
    r, w = ctx.rank, ctx.world_size
    assert w == 2 and ctx.under_launcher and ctx.run_dir, (w, ctx.under_launcher, ctx.run_dir)
    s = ctx.allreduce(np.array([r + 1.0, 2.0 * r], dtype=np.float64))
    assert s.tolist() == [3.0, 2.0], s
    stop, _ = ctx.stop_requested()
    assert not stop

    rng = np.random.default_rng(42)
    rep = rng.standard_normal(1000)  # the same on every rank (same seed)
    rows = 7
    start, count = ftl.split_rows(rows, r, w)
    split_full = np.arange(rows * 3, dtype=np.int32).reshape(rows, 3) * 7919
    split = np.ascontiguousarray(split_full[start:start + count])
    scalar = np.array(np.pi, dtype=np.float32)
    keep = (rep.copy(), split.copy(), scalar.copy())
    with ctx.checkpoint() as ck:
        ck.add("rep", rep)
        ck.add("split", split, layout=ftl.SPLIT, global_shape=(rows, 3))
        ck.add("scalar", scalar)
        blob = ck.add_blob("who", size=16, per_rank=True)
        blob[:] = np.frombuffer(f"rank {r:11d}".encode(), dtype=np.uint8)
        mine = blob.copy()
        assert ck.restore() == -1  # a fresh run directory
        assert ck.wait()["step"] == -1  # nothing saved: nothing pending, nothing raised
        ck.save(5)
        # Async: the state may change as soon as save returns; the checkpoint has the old bytes.
        rep[:] = 0
        split[:] = -1
        scalar[...] = 0
        blob[:] = 0
        stats = ck.wait()
        assert stats["step"] == 5, stats
        ctx.step_done(5)
        assert ck.restore() == 5
        assert rep.tobytes() == keep[0].tobytes(), "replicated array differs after restore"
        assert split.tobytes() == keep[1].tobytes(), "split rows differ after restore"
        assert scalar.tobytes() == keep[2].tobytes(), "0-d array differs after restore"
        assert blob.tobytes() == mine.tobytes(), "per-rank blob differs after restore"
        ck.save(5)  # the step just restored: already committed, so nothing is saved
        assert not ck.in_flight()
        try:
            ck.save(4)  # before the last step: FTL_ERR_INVAL
            raise AssertionError("save of an old step succeeded")
        except ftl.FtlError as e:
            assert e.name == "FTL_ERR_INVAL" and "step 4 is before step 5" in str(e), e
        # A step saved at L1 (ftl_ckpt_save_level): kept in host memory only, restored from there
        # (at L3 when the ranks have no L1 folder).
        ck.save(6, level=1)
        rep[:] = 0
        stats = ck.wait()
        want = 1 if os.environ.get("FTL_CKPT_L1_DIR") else 3
        # The levels the handle agreed (ftl_ckpt_levels): L1 with the ranks' folders, no L2 on one host.
        assert ck.levels() == ([1, 3] if want == 1 else [3]), ck.levels()
        assert stats["step"] == 6 and stats["level"] == want, stats
        assert not os.path.exists(os.path.join(ck.directory, "step-00000006")) or want == 3, "an L1 step in the run directory"
        assert ck.restore() == 6
        assert rep.tobytes() == keep[0].tobytes(), "replicated array differs after a restore from L1"
    ctx.finalize()
    print(f"binding ok rank {r}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
