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


def log_lines(logs, rank):
    """A program's own log (plain_ddp.py's, examples/hf-trainer's --log-dir): DIR/rank-R.log, split."""
    try:
        return [ln.split() for ln in open(os.path.join(logs, f"rank-{rank}.log")).read().split("\n") if ln]
    except OSError:
        return []


def run_events(run):
    """An ftl run's event log so far ([] before it exists or while a line is half written)."""
    try:
        with open(os.path.join(run, "events.jsonl")) as f:
            return [json.loads(line) for line in f]
    except (OSError, ValueError):
        return []


PLAIN = os.path.join(HERE, "..", "..", "tests", "python", "plain_ddp.py")
PLAIN_RANKS, PLAIN_KILL_AT = 2, 15


def plain_once(work, how):
    """The plain torch.distributed program (plain_ddp.py, no ftl in it) killed and resumed, under
    torchrun, ftl cold (`ftl run -n 2 -- python3 plain_ddp.py ...`, restart.standby off) or ftl with
    the preloading standby: seconds from the SIGKILL of rank 1 to the first step every rank logged
    after it, and the final weights compared with an unbroken run's by the caller."""
    logs, ckpt = os.path.join(work, "log"), os.path.join(work, "ckpt")
    args = [PLAIN, "--steps", str(STEPS), "--step-ms", str(STEP_MS), "--ckpt-every", "10", "--ckpt-dir", ckpt,
            "--log-dir", logs]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = open(os.path.join(work, "launcher.log"), "w")
    if how == "torchrun":
        cmd = ["torchrun", "--standalone", f"--nproc_per_node={PLAIN_RANKS}", "--max_restarts=3",
               "--monitor_interval=0.1", "--redirects=9:0", "--tee=9:0"] + args
    else:
        cmd = ["ftl", "run", "-n", str(PLAIN_RANKS), "--max-restarts", "3", "--run-dir", os.path.join(work, "run"),
               "--standby" if how == "ftl standby" else "--no-standby", "--", "/usr/bin/python3"] + args
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def lines(rank):
        return log_lines(logs, rank)

    def events():
        return run_events(os.path.join(work, "run"))

    def steps_after(rank, t):
        return [float(w[2]) for w in lines(rank) if w[0] == "step" and float(w[2]) > t]
    try:
        wait_for(lambda: sum(w[0] == "step" for w in lines(1)) >= PLAIN_KILL_AT, 120, proc, f"step {PLAIN_KILL_AT}")
        if how == "ftl standby":
            wait_for(lambda: any(e["event"] == "standby_parked" for e in events()), 120, proc, "a parked standby")
        elif how == "ftl cold":  # past start-up, as a failure hours in would be: the runner has said what it imported
            wait_for(lambda: any(e["event"] == "python_imports" for e in events()), 120, proc, "the start-up's imports")
        pid = int([w for w in lines(1) if w[0] == "started"][-1][3])
        t_kill = time.time()
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: all(steps_after(r, t_kill) for r in range(PLAIN_RANKS)), 120, proc, "the first resumed step")
        first = max(min(steps_after(r, t_kill)) for r in range(PLAIN_RANKS)) - t_kill
    except SideFailed as e:
        raise SideFailed(f"plain program, {how}: {e}\n{tail(out.name)}") from None
    finally:
        end_side(proc)
        out.close()
    started = [float(w[1]) for r in range(PLAIN_RANKS) for w in lines(r) if w[0] == "started" and float(w[1]) > t_kill]
    return {"new interpreter started": (min(started) - t_kill) if started else float("nan"),
            "first resumed step": first, "parked MB per rank": parked_mb(events(), PLAIN_RANKS)}


def parked_mb(events, ranks):
    """The parked standby's resident memory per rank (standby_parked's rss_kb), NaN without one."""
    kb = [e.get("rss_kb", -1) for e in events if e["event"] == "standby_parked"]
    return kb[0] / 1024.0 / ranks if kb and kb[0] > 0 else float("nan")


TRAINER = os.path.join(HERE, "..", "..", "examples", "hf-trainer", "train.py")
TRAINER_KILL_AT = 12  # past its first checkpoint (every 5 steps)


def venv_python():
    """The project's venv (scripts/setup-python.sh): transformers, peft and accelerate at their pins."""
    venv = os.environ.get("FTL_VENV") or os.path.join(HERE, "..", "..", ".venv")
    py = os.path.join(venv, "bin", "python")
    if not os.access(py, os.X_OK):
        raise SideFailed(f"no venv at {venv}: scripts/setup-python.sh makes it (bench/recovery/run.sh runs it)")
    return py


def trainer_once(work, how):
    """examples/hf-trainer (transformers' Trainer, 2 ranks, gloo) killed and resumed: under torchrun
    (Trainer's own checkpoints and resume_from_checkpoint), ftl cold (--no-standby) and ftl with the
    standby parked in ftl.hf.trainer_init(). Seconds from the SIGKILL of rank 1 to the first step
    every rank logged after it."""
    py = venv_python()
    logs = os.path.join(work, "log")
    args = [TRAINER, "--log-dir", logs, "--steps", "200", "--ckpt-every", "5", "--step-ms", str(STEP_MS)]
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", FTL_BACKEND="mpi")
    out = open(os.path.join(work, "launcher.log"), "w")
    if how == "torchrun":
        cmd = [py, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "--max_restarts=3",
               "--monitor_interval=0.1", "--redirects=9:0", "--tee=9:0"] + args + ["--output-dir", os.path.join(work, "out")]
    else:
        cmd = ["ftl", "run", "-n", "2", "--max-restarts", "3", "--run-dir", os.path.join(work, "run"),
               "--standby" if how == "ftl standby" else "--no-standby", "--", py] + args
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def lines(rank):
        return log_lines(logs, rank)

    def events():
        return run_events(os.path.join(work, "run"))

    def checkpointed():
        if how == "torchrun":
            return bool(glob.glob(os.path.join(work, "out", "checkpoint-*", "trainer_state.json")))
        return any(e["event"] == "ckpt_committed" for e in events())

    def steps_after(rank, t):
        return [float(w[2]) for w in lines(rank) if w[0] == "step" and float(w[2]) > t]
    try:
        wait_for(lambda: sum(w[0] == "step" for w in lines(1)) >= TRAINER_KILL_AT and checkpointed(), 180, proc,
                 f"step {TRAINER_KILL_AT} and a checkpoint")
        if how == "ftl standby":
            wait_for(lambda: any(e["event"] == "standby_parked" for e in events()), 180, proc, "a parked standby")
        elif how == "ftl cold":  # past start-up, as for the plain program
            wait_for(lambda: any(e["event"] == "python_imports" for e in events()), 180, proc, "the start-up's imports")
        # rank 1's program: the newest "started" line's pid (a parked standby logs nothing before it runs)
        pid = int([w for w in lines(1) if w[0] == "started"][-1][3])
        if how != "torchrun":
            pid = int([e for e in events() if e["event"] == "rank_started" and e["rank"] == 1][-1]["pid"])
            pid = int(open(f"/proc/{pid}/task/{pid}/children").read().split()[0])
        t_kill = time.time()
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: all(steps_after(r, t_kill) for r in range(2)), 180, proc, "the first resumed step")
        first = max(min(steps_after(r, t_kill)) for r in range(2)) - t_kill
    except SideFailed as e:
        raise SideFailed(f"hf-trainer, {how}: {e}\n{tail(out.name)}") from None
    finally:
        end_side(proc)
        out.close()
    return {"first resumed step": first, "parked MB per rank": parked_mb(events() if how != "torchrun" else [], 2)}


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
             ("lora standby", lambda w: ftl_once(w, lora=True, standby=True)),
             ("plain torchrun", lambda w: plain_once(w, "torchrun")), ("plain cold", lambda w: plain_once(w, "ftl cold")),
             ("plain standby", lambda w: plain_once(w, "ftl standby")),
             ("trainer torchrun", lambda w: trainer_once(w, "torchrun")),
             ("trainer cold", lambda w: trainer_once(w, "ftl cold")),
             ("trainer standby", lambda w: trainer_once(w, "ftl standby"))]
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
    print(f"a plain torch.distributed program (tests/python/plain_ddp.py: no ftl in it, {PLAIN_RANKS} ranks, gloo, 50 ms")
    print("steps, its own torch.save every 10 steps) under torchrun, `ftl run -- python3 plain_ddp.py` cold")
    print("(--no-standby) and with the standby parked in ftl's Python runner (torch imported)")
    pcols = [("torchrun", "plain torchrun"), ("ftl cold", "plain cold"), ("ftl standby", "plain standby")]
    print(f"{'phase':<24}" + "".join(f" {c:>12}" for c, _ in pcols) + f" {'cold/torchrun':>14} {'standby/torchrun':>17}")
    for p in ("new interpreter started", "first resumed step"):
        t, c, w = (med(k, p) for _, k in pcols)
        rc = f"{c / t:.3f}" if t == t and c == c and t > 0 else "-"
        rw = f"{w / t:.3f}" if t == t and w == w and t > 0 else "-"
        print(f"{p:<24} {fmt(t):>12} {fmt(c):>12} {fmt(w):>12} {rc:>14} {rw:>17}")
    print("each run's first resumed step (s): " + "; ".join(
        f"{name} " + ", ".join(f"{r['first resumed step']:.2f}" for r in results[key]) for name, key in pcols))
    print()
    print("examples/hf-trainer (transformers' Trainer + peft, 2 ranks, gloo, 50 ms steps, a checkpoint every 5 steps):")
    print("under torchrun (Trainer's own checkpoints, resume_from_checkpoint), ftl cold and with the standby parked")
    print("in ftl.hf.trainer_init(); seconds from the kill of rank 1 to the first step every rank logged after it")
    tcols = [("torchrun", "trainer torchrun"), ("ftl cold", "trainer cold"), ("ftl standby", "trainer standby")]
    print(f"{'phase':<24}" + "".join(f" {c:>12}" for c, _ in tcols) + f" {'cold/torchrun':>14} {'standby/torchrun':>17}")
    t, c, w = (med(k, "first resumed step") for _, k in tcols)
    print(f"{'first resumed step':<24} {fmt(t):>12} {fmt(c):>12} {fmt(w):>12} {c / t:>14.3f} {w / t:>17.3f}")
    print("each run's first resumed step (s): " + "; ".join(
        f"{name} " + ", ".join(f"{r['first resumed step']:.2f}" for r in results[key]) for name, key in tcols))
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
    pt, pc, pw = (med(k, "first resumed step") for _, k in pcols)
    print(f"goals, plain program: standby <= 0.4x torchrun's {pt:.3f} s: {pw:.3f} s, {pw / pt:.3f}x "
          f"({'met' if pw <= 0.4 * pt else 'NOT met'}); cold <= 1.0x: {pc:.3f} s, {pc / pt:.3f}x "
          f"({'met' if pc <= pt else 'NOT met'})")
    tw = med("trainer standby", "first resumed step")
    print(f"goals, hf-trainer: standby first resumed step <= 0.5 s: {tw:.3f} s ({'met' if tw <= 0.5 else 'NOT met'})")
    print(f"what a parked standby costs (resident memory per rank, median): plain program in ftl's Python runner "
          f"{med('plain standby', 'parked MB per rank'):.0f} MB; hf-trainer parked in ftl.hf.trainer_init() "
          f"{med('trainer standby', 'parked MB per rank'):.0f} MB")


if __name__ == "__main__":
    sys.exit(main())
