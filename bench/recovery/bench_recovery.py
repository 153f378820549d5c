#!/usr/bin/python3
# bench/recovery/bench_recovery.py: time from a rank's death to the first resumed step, split into
# phases, for ftl and for torchrun (Debian's python3-torch, --monitor_interval=0.1) restarting the
# same 4-rank CPU job, side by side in one run, alternating, median of N kills each.
#
#   build/release/bin on PATH; python3-torch installed (bench/recovery/run.sh does both)
#   /usr/bin/python3 bench/recovery/bench_recovery.py [RUNS]
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
RANKS, STEPS, STEP_MS, KILL_AT = 4, 400, 50, 15


def wait_for(pred, timeout=60.0):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.01)
    raise RuntimeError("timed out")


def ftl_once(work):
    run = os.path.join(work, "ftl")
    spec = os.path.join(work, "job.yaml")
    with open(spec, "w") as f:
        f.write(f"""name: recovery
ranks: {RANKS}
program: fault_probe
args: ["--steps", "{STEPS}", "--step-ms", "{STEP_MS}", "--save-every", "5"]
run_dir: {run}
restart: {{max_restarts: 1}}
""")
    proc = subprocess.Popen(["ftl", "run", "--kill-grace-ms", "1000", spec], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    events = os.path.join(run, "events.jsonl")

    def read():
        try:
            with open(events) as f:
                return [json.loads(line) for line in f]
        except (OSError, ValueError):
            return []

    def step_reached():
        try:
            return int(open(os.path.join(run, "probe-step")).read() or 0) >= KILL_AT
        except (OSError, ValueError):
            return False
    wait_for(step_reached)
    victim = [e for e in read() if e["event"] == "rank_started" and e["rank"] == 1][0]["pid"]
    # The agent's child is the program: kill the program, not the agent.
    child = int(open(f"/proc/{victim}/task/{victim}/children").read().split()[0])
    t_kill = time.time()
    os.kill(child, signal.SIGKILL)
    wait_for(lambda: any(e["event"] == "first_step" and e["attempt"] == 1 for e in read()))
    proc.send_signal(signal.SIGINT)
    proc.wait()
    ev = read()

    def first(name, attempt):
        ts = [e["t_us"] / 1e6 for e in ev if e["event"] == name and e["attempt"] == attempt]
        return min(ts) - t_kill if ts else float("nan")
    return {
        "noticed": first("failure", 0),
        "old gang gone": first("attempt_end", 0),
        "new gang started": first("rank_started", 1),
        "rendezvous done": first("rendezvous_complete", 1),
        "first resumed step": max(e["t_us"] / 1e6 for e in ev if e["event"] == "first_step" and e["attempt"] == 1) - t_kill,
    }


def torch_once(work):
    out = os.path.join(work, "torch")
    os.makedirs(out)
    stamps = []
    proc = subprocess.Popen(["torchrun", "--standalone", f"--nproc_per_node={RANKS}", "--max_restarts=1",
                             "--monitor_interval=0.1", "--redirects=9:0", "--tee=9:0",
                             os.path.join(HERE, "torch_worker.py"), str(STEPS), str(STEP_MS), out],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))

    def reader():
        for line in proc.stderr:
            stamps.append((time.time(), line))
    threading.Thread(target=reader, daemon=True).start()

    def log(attempt, rank):
        try:
            return open(os.path.join(out, f"torch-a{attempt}-r{rank}.log")).read().split("\n")
        except OSError:
            return []

    def steps_of(attempt, rank):
        return [line.split() for line in log(attempt, rank) if line.startswith("step ")]
    wait_for(lambda: len(steps_of(0, 1)) >= KILL_AT, 120)
    pid = int(log(0, 1)[0].split()[3])
    t_kill = time.time()
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: all(steps_of(1, r) for r in range(RANKS)), 120)
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    noticed = [t for t, line in stamps if t > t_kill and ("exitcode" in line or "Worker" in line or "failed" in line)]
    started = [float(log(1, r)[0].split()[1]) for r in range(RANKS)]
    return {
        "noticed": (min(noticed) - t_kill) if noticed else float("nan"),
        "old gang gone": float("nan"),
        "new gang started": min(started) - t_kill,
        "rendezvous done": float("nan"),
        "first resumed step": max(float(steps_of(1, r)[0][2]) for r in range(RANKS)) - t_kill,
    }


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    results = {"ftl": [], "torchrun": []}
    for i in range(runs):
        order = [("ftl", ftl_once), ("torchrun", torch_once)]
        if i % 2:
            order.reverse()
        for name, fn in order:
            work = tempfile.mkdtemp(prefix="ftl-bench-recovery-")
            try:
                results[name].append(fn(work))
            finally:
                shutil.rmtree(work, ignore_errors=True)
        print(f"run {i + 1}/{runs} done", file=sys.stderr)
    phases = ["noticed", "old gang gone", "new gang started", "rendezvous done", "first resumed step"]
    print(f"recovery after SIGKILL of one of {RANKS} ranks (seconds after the kill, median of {runs})")
    print(f"{'phase':<22} {'torchrun':>10} {'ftl':>10} {'ftl/torchrun':>13}")
    for p in phases:
        t = statistics.median([r[p] for r in results["torchrun"]])
        f = statistics.median([r[p] for r in results["ftl"]])
        ratio = f"{f / t:.3f}" if t == t and f == f and t > 0 else "-"
        ts = f"{t:.3f}" if t == t else "n/a"
        print(f"{p:<22} {ts:>10} {f:>10.3f} {ratio:>13}")
    f_new = statistics.median([r["new gang started"] for r in results["ftl"]])
    f_first = statistics.median([r["first resumed step"] for r in results["ftl"]])
    t_first = statistics.median([r["first resumed step"] for r in results["torchrun"]])
    print(f"goals: ftl's new gang started <= 0.5 s after the kill: {f_new:.3f} s "
          f"({'met' if f_new <= 0.5 else 'NOT met'}); first resumed step <= half of torchrun's: "
          f"{f_first:.3f} vs {t_first / 2:.3f} s ({'met' if f_first <= t_first / 2 else 'NOT met'})")


if __name__ == "__main__":
    main()
