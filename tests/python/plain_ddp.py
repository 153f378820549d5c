# tests/python/plain_ddp.py: a data-parallel training script written for torchrun that knows nothing
# of ftl: only RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT from the environment, gloo, and its own
# torch.save checkpoint every --ckpt-every steps in --ckpt-dir, which it resumes from. It reports no
# steps to any launcher (the way most programs people already have are written): the tests of what
# ftl shows and does for such a program run it, and bench/recovery times its restart under torchrun
# and under ftl (cold and with the preloading standby).
#   python3 plain_ddp.py --ckpt-dir DIR [--steps 40] [--ckpt-every 10] [--step-ms 50]
#                        [--log-dir DIR] [--out FILE] [--hold-at STEP --hold-file F]
# --log-dir: each rank appends "started TIME pid PID", "restored TIME step N" and "step N TIME" lines
# to DIR/rank-R.log (one log for torchrun and ftl alike: the benchmark's clock). --out: rank 0 writes
# the final weights' bytes there (a killed and resumed run must end with an unbroken run's bytes).
# --hold-at/--hold-file: after step STEP (and its checkpoint) every rank waits until F exists, so a
# test's kill lands mid-run however slow the machine (the run outlasts the event it waits for).
import time

STARTED = time.time()  # before the imports: importing torch is part of a restart's cost

import argparse  # noqa: E402
import os  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ckpt-dir", required=True)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--ckpt-every", type=int, default=10)
    p.add_argument("--step-ms", type=float, default=50)
    p.add_argument("--log-dir")
    p.add_argument("--out")
    p.add_argument("--hold-at", type=int, default=-1)
    p.add_argument("--hold-file")
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    log = None
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
        log = open(os.path.join(args.log_dir, f"rank-{rank}.log"), "a")
        log.write(f"started {STARTED:.6f} pid {os.getpid()}\n")
    torch.manual_seed(0)
    w = torch.zeros(8)
    step = 0
    path = os.path.join(args.ckpt_dir, "plain.pt")
    if os.path.exists(path):
        state = torch.load(path)
        step, w = state["step"], state["w"]
        print(f"rank {rank}: resumed from step {step}", flush=True)
    if log:
        log.write(f"restored {time.time():.6f} step {step}\n")
        log.flush()
    while step < args.steps:
        g = torch.full((8,), float(rank + 1) / world) * (1.0 + 0.01 * step)
        dist.all_reduce(g)
        w -= 0.01 * g
        step += 1
        if rank == 0:
            print(f"step {step}", flush=True)
        if log:
            log.write(f"step {step} {time.time():.6f}\n")
            log.flush()
        if step % args.ckpt_every == 0 and rank == 0:
            os.makedirs(args.ckpt_dir, exist_ok=True)
            torch.save({"step": step, "w": w}, path + ".tmp")
            os.replace(path + ".tmp", path)
        dist.barrier()
        time.sleep(args.step_ms / 1000.0)
        while step == args.hold_at and args.hold_file and not os.path.exists(args.hold_file):
            time.sleep(0.02)
    if rank == 0:
        print(f"done: {step} steps, w[0] = {w[0].item():.6f}", flush=True)
        if args.out:
            with open(args.out + ".tmp", "wb") as f:
                f.write(w.numpy().tobytes())
            os.replace(args.out + ".tmp", args.out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
