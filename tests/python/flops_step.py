#!/usr/bin/python3
# tests/python/flops_step.py: the binding's ctx.step_done(step, flops=...) under `ftl run -n 2`
# (tests/python/flops.sh): a negative, NaN or infinite flops raises FtlError (FTL_ERR_INVAL) naming
# it and counts nothing; then STEPS steps of STEP_MS milliseconds, each reporting FLOPS model FLOPs
# (argv: STEPS STEP_MS FLOPS), the last steps without flops (step_done(step): a heartbeat only).
# Prints "flops ok" per rank.
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ["FTL_SOURCE_DIR"], "python"))
import ftl  # noqa: E402


def main():
    steps, step_ms, flops = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    with ftl.init() as ctx:
        for bad in (-1.0, math.nan, math.inf):
            try:
                ctx.step_done(0, flops=bad)
            except ftl.FtlError as e:
                assert e.name == "FTL_ERR_INVAL" and "flops must be a finite number >= 0" in str(e), e
            else:
                raise AssertionError(f"step_done(flops={bad}) was accepted")
        for s in range(1, steps + 1):
            time.sleep(step_ms / 1000)
            ctx.step_done(s, flops=flops)
            if ctx.rank == 0:
                ctx.progress_report(s, steps + 2, 1.0 / s, s)
        # Steps without FLOPs add nothing to the count.
        ctx.step_done(steps + 1)
        ctx.step_done(steps + 2, flops=None)
        print(f"flops ok rank {ctx.rank}", flush=True)


main()
