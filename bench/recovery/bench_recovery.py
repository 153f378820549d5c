#!/usr/bin/python3
# bench/recovery/bench_recovery.py: time from a rank's death to the first resumed step, split into
# phases, for ftl and for torchrun (Debian's python3-torch, --monitor_interval=0.1) restarting the
# same 4-rank CPU job, side by side in one run, alternating, median of N kills each; and the same
# for the PyTorch example (examples/torch-lora) under ftl and under torchrun.
#
#   build/release/bin on PATH; python3-torch installed (bench/recovery/run.sh does both)
#   /usr/bin/python3 bench/recovery/bench_recovery.py [RUNS | --smoke]
#
# --smoke is the smallest size: one kill per side (RUNS=1), as the test suite's smoke test runs it
# (tests/bench/recovery_smoke.sh); it checks that both sides, torchrun's included, recover and that
# the tables are printed, not the numbers. A side that dies fails the run at once, with the tail of
# what it printed, instead of timing out.
import glob
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LORA = os.path.join(HERE, "..", "..", "examples", "torch-lora", "train.py")
RANKS, STEPS, STEP_MS, KILL_AT = 4, 400, 50, 15


class SideFailed(RuntimeError):
    pass


def wait_for(pred, timeout=60.0, proc=None, what="the condition"):
    """Until pred() is true; fails at once when proc (the launcher of a side) has exited."""
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        if proc is not None and proc.poll() is not None:
            raise SideFailed(f"{proc.args[0]} exited with {proc.returncode} before {what}")
        time.sleep(0.01)
    raise SideFailed(f"timed out after {timeout:.0f} s waiting for {what}")


def end_side(proc):
    """Ends a side's launcher and everything it started (its own session): SIGINT, then SIGKILL."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def tail(path, lines=30):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def prepare_finetune(data):
    """The example fine-tune's data and base model, made once (small: 1 layer, 32 channels)."""
    subprocess.run(["ftl-finetune-data", "--out", data], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["ftl", "run", "-n", "1", "--run-dir", os.path.join(data, "base-run"), "--", "ftl-finetune"]
                   + finetune_args(data, 0), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=dict(os.environ, FTL_BACKEND="mpi"))


def finetune_args(data, steps):
    return ["--data", data, "--base", os.path.join(data, "base.h5"), "--pretrain-steps", "50", "--layers", "1",
            "--embd", "32", "--heads", "2", "--steps", str(steps), "--batch", "8", "--rank", "4", "--alpha", "8",
            "--ckpt-every", "5", "--log-every", "1000", "--throttle-ms", str(STEP_MS)]


def lora_args():
    """examples/torch-lora at the same cadence: 50 ms steps, a checkpoint every 5 steps."""
    return ["--steps", str(STEPS), "--ckpt-every", "5", "--step-ms", str(STEP_MS)]


def ftl_once(work, finetune_data=None, lora=False, standby=False):
    run = os.path.join(work, "ftl")
    spec = os.path.join(work, "job.yaml")
    if lora:
        program, args = os.path.abspath(LORA), lora_args()
    elif finetune_data:
        program, args = "ftl-finetune", finetune_args(finetune_data, STEPS)
    else:
        program, args = "fault_probe", ["--steps", str(STEPS), "--step-ms", str(STEP_MS), "--save-every", "5"]
    with open(spec, "w") as f:
        f.write(f"""name: recovery
ranks: {RANKS}
program: {program}
args: {json.dumps(args)}
env: {{FTL_BACKEND: mpi, OMP_NUM_THREADS: "1"}}
run_dir: {run}
restart: {{max_restarts: 1, standby: {"on" if standby else "off"}}}
""")
    log_path = os.path.join(work, "ftl.log")
    with open(log_path, "w") as log_file:
        proc = subprocess.Popen(["ftl", "run", "--kill-grace-ms", "1000", spec], stdout=log_file,
                                stderr=subprocess.STDOUT, start_new_session=True)
    events = os.path.join(run, "events.jsonl")

    def read():
        try:
            with open(events) as f:
                return [json.loads(line) for line in f]
        except (OSError, ValueError):
            return []

    def step_reached():
        if finetune_data or lora:
            return any(e["event"] == "ckpt_committed" and e.get("step", 0) >= KILL_AT for e in read())
        try:
            return int(open(os.path.join(run, "probe-step")).read() or 0) >= KILL_AT
        except (OSError, ValueError):
            return False
    try:
        wait_for(step_reached, proc=proc, what=f"step {KILL_AT}")
        if standby:
            wait_for(lambda: any(e["event"] == "standby_parked" for e in read()), 120, proc, "a parked standby")
        victim = [e for e in read() if e["event"] == "rank_started" and e["rank"] == 1][0]["pid"]
        # The agent's child is the program: kill the program, not the agent.
        child = int(open(f"/proc/{victim}/task/{victim}/children").read().split()[0])
        t_kill = time.time()
        os.kill(child, signal.SIGKILL)
        wait_for(lambda: any(e["event"] == "first_step" and e["attempt"] == 1 for e in read()), proc=proc,
                 what="the first resumed step")
    except SideFailed as e:
        errs = "".join(tail(f) for f in sorted(glob.glob(os.path.join(run, "attempt-*", "rank-*.err"))))
        raise SideFailed(f"ftl side ({program}): {e}\n{tail(log_path)}{errs}") from None
    finally:
        end_side(proc)
    ev = read()

    def first(name, attempt):
        ts = [e["t_us"] / 1e6 for e in ev if e["event"] == name and e["attempt"] == attempt]
        return min(ts) - t_kill if ts else float("nan")
    return {
        "noticed": first("failure", 0),
        "old gang gone": first("attempt_end", 0),
        "new gang started": first("rank_started", 1),
        "rendezvous done": first("rendezvous_complete", 1),
        "restored": first("ckpt_restored", 1),
        "first resumed step": max(e["t_us"] / 1e6 for e in ev if e["event"] == "first_step" and e["attempt"] == 1) - t_kill,
    }


def torch_once(work, lora=False):
    out = os.path.join(work, "torch")
    os.makedirs(out)
    stamps = []
    if lora:  # the same program, its checkpoints with torch.save (train.py --torch-save)
        prefix, program = "lora", [os.path.abspath(LORA), "--torch-save", os.path.join(work, "ckpt"),
                                   "--stamp-dir", out, "--out", os.path.join(work, "export")] + lora_args()
    else:
        prefix, program = "torch", [os.path.join(HERE, "torch_worker.py"), str(STEPS), str(STEP_MS), out]
    proc = subprocess.Popen(["torchrun", "--standalone", f"--nproc_per_node={RANKS}", "--max_restarts=1",
                             "--monitor_interval=0.1", "--redirects=9:0", "--tee=9:0"] + program,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"), start_new_session=True)

    def reader():
        for line in proc.stderr:
            stamps.append((time.time(), line))
    threading.Thread(target=reader, daemon=True).start()

    def log(attempt, rank):
        try:
            return open(os.path.join(out, f"{prefix}-a{attempt}-r{rank}.log")).read().split("\n")
        except OSError:
            return []

    def steps_of(attempt, rank):
        return [line.split() for line in log(attempt, rank) if line.startswith("step ")]
    try:
        wait_for(lambda: len(steps_of(0, 1)) >= KILL_AT, 120, proc, f"step {KILL_AT}")
        pid = int(log(0, 1)[0].split()[3])
        t_kill = time.time()
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: all(steps_of(1, r) for r in range(RANKS)), 120, proc, "the first resumed step")
    except SideFailed as e:
        end_side(proc)
        time.sleep(0.2)  # the reader thread drains what torchrun printed last
        printed = "".join(line for _, line in stamps[-200:])
        raise SideFailed(f"torchrun side ({os.path.basename(program[0])}): {e}\n{printed}") from None
    finally:
        end_side(proc)
    noticed = [t for t, line in stamps if t > t_kill and ("exitcode" in line or "Worker" in line or "failed" in line)]
    started = [float(log(1, r)[0].split()[1]) for r in range(RANKS)]
    return {
        "noticed": (min(noticed) - t_kill) if noticed else float("nan"),
        "old gang gone": float("nan"),
        "new gang started": min(started) - t_kill,
        "rendezvous done": float("nan"),
        "restored": max(float(log(1, r)[1].split()[1]) for r in range(RANKS)) - t_kill,
        "first resumed step": max(float(steps_of(1, r)[0][2]) for r in range(RANKS)) - t_kill,
    }


def main():
    args = sys.argv[1:]
    if args == ["--smoke"]:
        runs = 1
    elif not args or (len(args) == 1 and args[0].isdigit() and int(args[0]) >= 1):
        runs = int(args[0]) if args else 5
    else:
        print("usage: bench_recovery.py [RUNS (default 5)] | --smoke", file=sys.stderr)
        return 2
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    data = tempfile.mkdtemp(prefix="ftl-bench-recovery-data-")
    prepare_finetune(data)
    sides = [("torchrun", torch_once), ("ftl", ftl_once), ("ftl fine-tune", lambda w: ftl_once(w, data)),
             ("ftl standby", lambda w: ftl_once(w, standby=True)),
             ("fine-tune standby", lambda w: ftl_once(w, data, standby=True)),
             ("lora torchrun", lambda w: torch_once(w, lora=True)), ("lora ftl", lambda w: ftl_once(w, lora=True)),
             ("lora standby", lambda w: ftl_once(w, lora=True, standby=True))]
    results = {name: [] for name, _ in sides}
    try:
        for i in range(runs):
            order = sides if i % 2 == 0 else list(reversed(sides))
            for name, fn in order:
                work = tempfile.mkdtemp(prefix="ftl-bench-recovery-")
                try:
                    results[name].append(fn(work))
                except SideFailed as e:
                    print(f"bench-recovery: side '{name}' failed: {e}", file=sys.stderr)
                    return 1
                finally:
                    shutil.rmtree(work, ignore_errors=True)
            print(f"run {i + 1}/{runs} done", file=sys.stderr)
    finally:
        shutil.rmtree(data, ignore_errors=True)
    phases = ["noticed", "old gang gone", "new gang started", "rendezvous done", "restored", "first resumed step"]

    def med(name, p):
        return statistics.median([r[p] for r in results[name]])

    def fmt(v):
        return f"{v:.3f}" if v == v else "n/a"
    print(f"recovery after SIGKILL of one of {RANKS} ranks (seconds after the kill, median of {runs});")
    print("torchrun and ftl run the same job (50 ms steps, one allreduce each, rank 0 saves every 5 steps);")
    print("'ftl fine-tune' is the example fine-tune resuming from an ftl_ckpt checkpoint (HDF5 shards);")
    print("'cold': restart.standby off (a new gang from mpirun on); 'standby': a parked standby takes over")
    cols = [("torchrun", "torchrun"), ("ftl cold", "ftl"), ("ftl standby", "ftl standby"),
            ("fine-tune cold", "ftl fine-tune"), ("fine-tune standby", "fine-tune standby")]
    print(f"{'phase':<20}" + "".join(f" {c:>17}" for c, _ in cols) + f" {'standby/torchrun':>17}")
    for p in phases:
        vals = [med(k, p) for _, k in cols]
        t, w = vals[0], vals[2]
        ratio = f"{w / t:.3f}" if t == t and w == w and t > 0 else "-"
        print(f"{p:<20}" + "".join(f" {fmt(v):>17}" for v in vals) + f" {ratio:>17}")
    print()
    print("examples/torch-lora (PyTorch, gloo, the same 50 ms steps and a checkpoint every 5 steps): under ftl")
    print("(checkpoints through the Python binding; cold, and with a standby parked in ftl.init() after its")
    print("imports) and under torchrun (the same program, --torch-save)")
    lcols = [("torchrun", "lora torchrun"), ("ftl cold", "lora ftl"), ("ftl standby", "lora standby")]
    print(f"{'phase':<20}" + "".join(f" {c:>12}" for c, _ in lcols) + f" {'cold/torchrun':>14} {'standby/torchrun':>17}")
    for p in phases:
        t, c, w = (med(k, p) for _, k in lcols)
        rc = f"{c / t:.3f}" if t == t and c == c and t > 0 else "-"
        rw = f"{w / t:.3f}" if t == t and w == w and t > 0 else "-"
        print(f"{p:<20} {fmt(t):>12} {fmt(c):>12} {fmt(w):>12} {rc:>14} {rw:>17}")
    print()
    t_first = med("torchrun", "first resumed step")
    for name in ("ftl", "ftl fine-tune"):
        f_new, f_first = med(name, "new gang started"), med(name, "first resumed step")
        print(f"goals, {name}: new gang started <= 0.5 s after the kill: {f_new:.3f} s "
              f"({'met' if f_new <= 0.5 else 'NOT met'}); first resumed step <= half of torchrun's "
              f"({t_first / 2:.3f} s): {f_first:.3f} s ({'met' if f_first <= t_first / 2 else 'NOT met'})")
    for name, key, goal in (("C job", "ftl standby", 0.15), ("fine-tune", "fine-tune standby", 0.15),
                            ("torch-lora", "lora standby", 0.3)):
        v = med(key, "first resumed step")
        print(f"goals, standby, {name}: first resumed step <= {goal} s after the kill: {v:.3f} s "
              f"({'met' if v <= goal else 'NOT met'})")


if __name__ == "__main__":
    sys.exit(main())
