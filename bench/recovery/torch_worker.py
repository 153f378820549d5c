# bench/recovery/torch_worker.py: the torchrun side of bench-recovery: the same job as ftl's side
# (fault_probe): steps of STEP_MS, one allreduce each (gloo), rank 0 saves its step every 5 steps
# and every worker resumes from it. Each worker logs when it started and when each step finished.
import os
import sys
import time

started = time.time()
import torch  # noqa: E402  (after the start stamp on purpose: the import is part of a restart's cost)
import torch.distributed as dist  # noqa: E402

steps, step_ms, out = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
dist.init_process_group("gloo")
rank = dist.get_rank()
restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
log = open(os.path.join(out, f"torch-a{restart}-r{rank}.log"), "w")
log.write(f"started {started} pid {os.getpid()}\n")
log.flush()
ckpt = os.path.join(out, "torch-step.pt")
step = torch.load(ckpt)["step"] if os.path.exists(ckpt) else 0
log.write(f"restored {time.time()} step {step}\n")
one = torch.ones(1)
while step < steps:
    time.sleep(step_ms / 1000.0)
    dist.all_reduce(one)
    step += 1
    log.write(f"step {step} {time.time()}\n")
    log.flush()
    if rank == 0 and step % 5 == 0:
        torch.save({"step": step}, ckpt + ".tmp")
        os.replace(ckpt + ".tmp", ckpt)
dist.destroy_process_group()
