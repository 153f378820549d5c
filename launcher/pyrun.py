# launcher/pyrun.py: how `ftl run` starts a Python program that does not use ftl's library, so that
# a standby can take over from a killed attempt in a fraction of a second (docs/fault-tolerance.md,
# "Warm restarts for Python programs"). The rank agent runs
#
#     PYTHON [the program's interpreter options] pyrun.py SCRIPT ARGS...     (or  ... pyrun.py -m MODULE ARGS...)
#
# with FTL_PYRUN_FD, its end of a socket pair to the agent (one JSON object per line each way):
#
# - In an attempt's rank it runs the program at once, as a fresh interpreter would: the script in
#   the real __main__ module with sys.argv, sys.path[0], __file__ and the working folder the
#   interpreter itself would give it, `-m` as runpy does for the interpreter. A daemon thread
#   watches sys.modules and, once the program has stopped importing (no new module for 2 s, or after
#   2 minutes), tells the agent which modules it imported from the standard library and the
#   installed packages ({"type": "imports", "modules": [...]}): the next standby preloads them.
# - In a cold restart's rank of a program that imported torch.distributed at start-up (FTL_PRELOAD
#   says so: the last attempt's imports), it imports those modules, then waits (at most 5 s) until
#   rank 0's TCPStore answers on MASTER_PORT before it runs the program: torch retries a refused
#   connection only a second later, which torchrun's workers never meet (its agent holds the store).
# - In a standby's rank (FTL_STANDBY=1) it first imports FTL_PRELOAD (the modules recorded from the
#   running attempt and the job's restart.preload), never a module of the program's own folder or
#   working folder, says {"type": "parked"} and blocks on the socket. The agent passes the
#   launcher's activation on ({"type": "activate", "attempt": N, "attempt_dir": ...}); the runner sets
#   FTL_ATTEMPT and FTL_ATTEMPT_DIR, drops FTL_STANDBY, and runs the program as above. The socket
#   closing first (the standby dismissed) ends it quietly.
#
# Only the standard library is used, and little of it before the program runs. What can differ
# from a fresh interpreter is listed in docs/fault-tolerance.md: the preloaded modules' import-time
# state, sys.orig_argv, and this runner's few standard modules already in sys.modules.
# FTL_PYRUN_FD, FTL_PRELOAD and FTL_PYRUN are removed from the environment before the program runs.


def _pyrun():
    # Everything this runner uses is local to this function: the program runs in this module's own
    # namespace (the real __main__), which is emptied first, as a fresh interpreter's would be.
    import os
    import sys

    def channel_from_env():
        fd = os.environ.pop("FTL_PYRUN_FD", "")
        os.environ.pop("FTL_PYRUN", None)
        try:
            fd = int(fd)
            os.set_inheritable(fd, False)  # the program's own children must not hold the agent's socket
            return fd
        except (ValueError, OSError):
            return -1

    def send(fd, obj):
        import json
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        try:
            while data:
                data = data[os.write(fd, data):]
        except OSError:
            pass

    def read_line(fd):
        buf = b""
        while not buf.endswith(b"\n"):
            try:
                chunk = os.read(fd, 65536)
            except InterruptedError:
                continue
            except OSError:
                return None
            if not chunk:
                return None
            buf += chunk
            if len(buf) > 1 << 20:
                return None
        return buf

    def under(path, folders):
        return any(f and (path == f or path.startswith(f.rstrip(os.sep) + os.sep)) for f in folders)

    def own_folders(script_dir):
        # The program's own code: its script's folder and the working folder. The standby never
        # imports from them (that would run the program's code before its activation).
        return [os.path.realpath(p) for p in (script_dir, os.getcwd()) if p]

    def origin_of(mod):
        spec = getattr(mod, "__spec__", None)
        origin = getattr(spec, "origin", None) if spec is not None else None
        if origin in ("built-in", "frozen"):
            return origin
        return os.path.realpath(origin) if isinstance(origin, str) and os.path.isabs(origin) else None

    def recorder(fd, baseline, script_dir):
        # Waits for the program to stop importing, then names what it imported from outside its
        # own folders, in import order, cut to 16 KiB (the first imported, the costliest to
        # redo, come first).
        import time
        mine = own_folders(script_dir)
        start, last_count, last_change = time.monotonic(), -1, time.monotonic()
        while True:
            time.sleep(0.2)
            now, count = time.monotonic(), len(sys.modules)
            if count != last_count:
                last_count, last_change = count, now
            if (now - last_change >= 2.0 and now - start >= 1.0) or now - start >= 120.0:
                break
        names, size = [], 0
        for name, mod in list(sys.modules.items()):
            if name in baseline or name == "__main__" or mod is None:
                continue
            origin = origin_of(mod)
            if origin is None or (origin not in ("built-in", "frozen") and under(origin, mine)):
                continue
            size += len(name) + 3
            if size > 16384:
                break
            names.append(name)
        send(fd, {"type": "imports", "modules": names, "settled_s": round(time.monotonic() - start, 3)})

    def preload(names, script_dir):
        # The modules the previous attempt imported: each in its own try, since one that fails here
        # must not keep the program from starting (it fails, or not, in the program as it would).
        import importlib
        import importlib.util
        import time
        mine = own_folders(script_dir)
        t0, done, failed, skipped = time.monotonic(), 0, [], 0
        for name in names:
            if not name or name in sys.modules:
                continue
            try:
                spec = importlib.util.find_spec(name)
                origin = spec.origin if spec is not None else None
                if origin is None or (origin not in ("built-in", "frozen") and under(os.path.realpath(origin), mine)):
                    skipped += 1
                    continue
                importlib.import_module(name)
                done += 1
            except BaseException as e:  # noqa: B902 -- an import may raise anything, SystemExit included
                if len(failed) < 20:
                    failed.append(f"{name}: {type(e).__name__}: {e}"[:300])
        return {"imported": done, "failed": failed, "skipped": skipped, "import_s": round(time.monotonic() - t0, 3)}

    def resident_kib():
        try:
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
        except (OSError, ValueError, IndexError):
            return -1

    def park(fd, names, script_dir):
        import json
        said = preload(names, script_dir)
        said.update({"type": "parked", "rss_kb": resident_kib()})
        send(fd, said)
        while True:
            line = read_line(fd)
            if line is None:  # dismissed: the agent closed the socket
                os._exit(0)
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get("type") == "activate":
                break
        attempt, attempt_dir = msg.get("attempt"), msg.get("attempt_dir")
        if isinstance(attempt, int):
            os.environ["FTL_ATTEMPT"] = str(attempt)
        if isinstance(attempt_dir, str) and attempt_dir:
            os.environ["FTL_ATTEMPT_DIR"] = attempt_dir
        os.environ.pop("FTL_STANDBY", None)

    def wait_for_master(names):
        # torch.distributed's env:// start: rank 0's program opens a TCPStore on MASTER_PORT and the
        # others connect to it, and a connection refused because rank 0 is not there yet is tried
        # again only a second later (torch 1.13's c10d). torchrun's workers never meet that: its
        # agent holds the store. So a rank other than 0 of a program that imported torch.distributed
        # at start-up starts it once rank 0's store answers, or after 5 s in any case. (The launcher
        # gives a program that calls ftl.init() no list: its ranks meet there first.)
        if os.environ.get("RANK", "0") == "0" or "torch.distributed" not in names:
            return
        addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT", "")
        if not addr or not port.isdigit():
            return
        import socket
        import time
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            try:
                socket.create_connection((addr, int(port)), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.005)

    def usage():
        sys.stderr.write("ftl pyrun: usage: python3 pyrun.py SCRIPT [ARGS...] | -m MODULE [ARGS...] (started by `ftl run`)\n")
        sys.exit(2)

    args = sys.argv[1:]
    if not args or (args[0] == "-m" and len(args) < 2):
        usage()
    module = args[1] if args[0] == "-m" else None
    script = None if module else args[0]
    # sys.path[0] as the interpreter computes it: the script's real folder, or for -m the working folder.
    script_dir = os.path.dirname(os.path.realpath(script)) if script else os.getcwd()
    sys.path[0] = script_dir
    fd = channel_from_env()
    names = [n for n in os.environ.pop("FTL_PRELOAD", "").split(",") if n]
    if os.environ.get("FTL_STANDBY") == "1":
        if fd < 0:  # never run the program outside an attempt: a standby that cannot park ends
            sys.stderr.write("ftl pyrun: a standby rank without its agent's socket (FTL_PYRUN_FD) cannot park\n")
            sys.exit(1)
        park(fd, names, script_dir)
    elif "torch.distributed" in names:
        # A cold restart of a program known to start torch.distributed: every rank imports what the
        # last attempt imported now, side by side, so that the wait for rank 0's store below does not
        # put the ranks' imports one after the other.
        preload(names, script_dir)
    wait_for_master(names)
    if fd >= 0:
        import threading
        baseline = set(sys.modules)
        threading.Thread(target=recorder, args=(fd, baseline, script_dir), name="ftl-pyrun-imports",
                         daemon=True).start()

    import builtins
    main_dict = sys.modules["__main__"].__dict__
    runner_code = sys._getframe().f_code  # this function's frames are left out of a traceback
    main_dict.clear()
    main_dict["__builtins__"] = builtins
    try:
        if module:
            import runpy
            sys.argv = [module] + args[2:]  # runpy puts the module's file in argv[0], as -m does
            runpy._run_module_as_main(module, alter_argv=True)
        else:
            from importlib.machinery import SourceFileLoader
            path = os.path.join(os.getcwd(), script)
            sys.argv = [script] + args[1:]
            with open(script, "rb") as f:
                source = f.read()
            main_dict.update({"__name__": "__main__", "__doc__": None, "__package__": None, "__spec__": None,
                              "__loader__": SourceFileLoader("__main__", path), "__file__": path, "__cached__": None,
                              "__annotations__": {}})
            exec(compile(source, path, "exec", dont_inherit=True), main_dict)
    except SystemExit:
        raise
    except BaseException as e:
        # The traceback a fresh interpreter prints: from the program's first frame on (runpy's, for
        # -m), not this runner's.
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code is runner_code:
            tb = tb.tb_next
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        if isinstance(e, KeyboardInterrupt):
            import signal
            sys.stdout.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        sys.exit(1)


_pyrun()
