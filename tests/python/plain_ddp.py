# tests/python/plain_ddp.py: a data-parallel training script written for torchrun that knows nothing
# of ftl: only RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT from the environment, gloo, and its own
# torch.save checkpoint every --ckpt-every steps in --ckpt-dir, which it resumes from. It reports no
# steps to any launcher (the way most programs people already have are written): the tests of what
# ftl shows and does for such a program run it.
#   python3 plain_ddp.py --ckpt-dir DIR [--steps 40] [--ckpt-every 10] [--step-ms 50]
import argparse
import os
import time

import torch
import torch.distributed as dist


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ckpt-dir", required=True)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--ckpt-every", type=int, default=10)
    p.add_argument("--step-ms", type=float, default=50)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    w = torch.zeros(8)
    step = 0
    path = os.path.join(args.ckpt_dir, "plain.pt")
    if os.path.exists(path):
        state = torch.load(path)
        step, w = state["step"], state["w"]
        print(f"rank {rank}: resumed from step {step}", flush=True)
    while step < args.steps:
        g = torch.full((8,), float(rank + 1) / world)
        dist.all_reduce(g)
        w -= 0.01 * g
        step += 1
        if rank == 0:
            print(f"step {step}", flush=True)
        if step % args.ckpt_every == 0 and rank == 0:
            os.makedirs(args.ckpt_dir, exist_ok=True)
            torch.save({"step": step, "w": w}, path + ".tmp")
            os.replace(path + ".tmp", path)
        dist.barrier()
        time.sleep(args.step_ms / 1000.0)
    if rank == 0:
        print(f"done: {step} steps, w[0] = {w[0].item():.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
