#!/usr/bin/env python3
# tests/fault/forger.py: another local user's attempts to act on a running job through the
# launcher's wire (tests/fault/ft_stranger.sh; docs/security.md, "Another user on the same host").
# Standard library only: it runs as an account with nothing of the job's.
#
#   forger.py attack TARGET...     every forgery below against each TARGET ("HOST:PORT", a launcher's
#                                  rendezvous server; "@NAME", a relay's abstract socket), one
#                                  connection each; one JSON line per forgery: what was sent and what
#                                  came back
#   forger.py nonce TARGET         a fresh connection's challenge nonce (for the replay case)
#   forger.py replay TARGET PROOF  a hello carrying PROOF (made for another connection's nonce)
#   forger.py prove TARGET TOKEN   a hello proven with TOKEN (another attempt's, e.g. the standby's)
#   forger.py l2 HOST:PORT         the forgeries against a rank's L2 listener (checkpoint/ckpt_l2_tcp.c:
#                                  a 20-byte challenge, then a 52-byte hello whose MAC proves the
#                                  restore's token): a hello made for another nonce, one answering
#                                  the challenge with a guessed token, and a silent connection; one
#                                  JSON line each
#   forger.py visible TARGET       whether TARGET is listed in /proc/net/tcp or /proc/net/unix (what
#                                  a stranger can find without being told)
import hashlib
import hmac
import json
import os
import socket
import struct
import sys
import time

WIRE_VERSION = 4


def connect(target):
    if target.startswith("@"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect("\0" + target[1:])
    else:
        host, port = target.rsplit(":", 1)
        s = socket.create_connection((host, int(port)), timeout=5)
    s.settimeout(1.0)
    return s


def read_line(s, timeout=1.0):
    """The first line the peer sends within timeout; '' when none; None when it closed first."""
    s.settimeout(timeout)
    data = b""
    end = time.monotonic() + timeout
    try:
        while b"\n" not in data and time.monotonic() < end:
            chunk = s.recv(4096)
            if not chunk:
                return data.decode(errors="replace") if data else None
            data += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    return data.split(b"\n")[0].decode(errors="replace")


def drain(s, timeout=0.7):
    """What the peer sends until it closes or timeout passes, and whether it closed."""
    out = b""
    end = time.monotonic() + timeout
    s.settimeout(0.1)
    while time.monotonic() < end:
        try:
            chunk = s.recv(4096)
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return out.decode(errors="replace"), True
        if not chunk:
            return out.decode(errors="replace"), True
        out += chunk
    return out.decode(errors="replace"), False


def nonce_of(line):
    try:
        msg = json.loads(line)
    except (TypeError, ValueError):
        return ""
    return msg.get("nonce", "") if isinstance(msg, dict) and msg.get("type") == "challenge" else ""


def proof(token, nonce, role, rank):
    text = f"ftl-rdzv-{WIRE_VERSION}\n{nonce}\n{role}\n{rank}".encode()
    return hmac.new(token.encode(), text, hashlib.sha256).hexdigest()


def hello(role, rank, **extra):
    msg = {"type": role, "version": WIRE_VERSION, "rank": rank, "world_size": 4, "host": "forged", "pid": 1,
           "wall_us": int(time.time() * 1e6)}
    msg.update(extra)
    return msg


def forge(target, name, lines_for):
    """One forgery: a connection, its challenge read, the lines lines_for(nonce) sent, the answer."""
    rec = {"target": target, "forgery": name}
    try:
        s = connect(target)
    except OSError as e:
        rec.update(connected=False, error=str(e))
        return rec
    first = read_line(s)
    rec["challenge"] = first is not None and bool(nonce_of(first))
    if first is None:
        rec.update(closed=True, answer="")
        s.close()
        return rec
    sent = 0
    try:
        for msg in lines_for(nonce_of(first)):
            s.sendall((json.dumps(msg, separators=(",", ":")) + "\n").encode())
            sent += 1
    except (BrokenPipeError, ConnectionResetError):
        pass
    answer, closed = drain(s)
    s.close()
    rec.update(sent=sent, answer=answer.strip()[:300], closed=closed)
    return rec


def attack(targets):
    exit_code = {"type": "exit", "exit_code": 1, "signal": 0, "exec_error": "", "wall_us": 1}
    forgeries = [
        # a joined rank's agent, no token at all, then its exit (the review's forgery)
        ("hello_no_proof_then_exit", lambda n: [hello("agent", 2), exit_code]),
        # an older peer's hello with a guessed token in the clear
        ("hello_guessed_token_then_exit", lambda n: [hello("agent", 2, version=3, token="0" * 32 + "-a0"), exit_code]),
        # the challenge answered with a proof of a guessed token
        ("hello_wrong_proof_then_exit", lambda n: [hello("agent", 2, proof=proof("guess-a0", n, "agent", 2)), exit_code]),
        # a rank that already joined, joining again
        ("rank_hello_joined", lambda n: [hello("rank", 1, proof=proof("guess-a0", n, "rank", 1)), {"type": "bye"}]),
        # reports with no hello: a heartbeat, progress, an agent's alive, a stop, a goodbye
        ("heartbeat_without_hello", lambda n: [{"type": "step", "step": 99999, "compute_ms": 1.0}]),
        ("progress_without_hello", lambda n: [{"type": "step", "step": 99999, "total_steps": 99999, "loss": 0.0,
                                               "tokens": 1, "tokens_per_s": 1}]),
        ("alive_without_hello", lambda n: [{"type": "alive", "state": "Z", "rss_kb": 1}]),
        ("stop_without_hello", lambda n: [{"type": "stop", "reason": "forged"}, {"type": "stopping", "signal": 15,
                                                                                  "by": "launcher"}]),
        ("exit_without_hello", lambda n: [exit_code]),
        # a relay: its hello with a wrong proof, then a forged batch and a forwarded exit
        ("relay_batch", lambda n: [{"type": "relay", "version": WIRE_VERSION, "proof": proof("guess-a0", n, "relay", -1),
                                    "host": "forged", "pid": 1},
                                   {"type": "batch", "step": [[2, 99999, 1.0]], "alive": [[2, "Z", 1]]},
                                   {"type": "fwd", "role": "agent", "rank": 2, "msg": exit_code}]),
        ("batch_without_hello", lambda n: [{"type": "batch", "step": [[2, 99999, 1.0]]}]),
        ("fwd_without_hello", lambda n: [{"type": "fwd", "role": "agent", "rank": 2, "msg": exit_code}]),
    ]
    for target in targets:
        for name, lines_for in forgeries:
            print(json.dumps(forge(target, name, lines_for)), flush=True)


def l2_hello(token, nonce, shard):
    mac = hmac.new(token, b"ftl-l2-2" + nonce + struct.pack("=iii", 4, 0, shard), hashlib.sha256).digest()
    return b"ftl-l2\0\2" + mac + struct.pack("=iii", 4, 0, shard)


def l2_attack(target):
    """Every connection is made first (the listener may not accept yet: they wait in its backlog),
    then "connected" is printed, and each is played once its challenge comes."""
    host, port = target.rsplit(":", 1)
    guess = os.urandom(16)
    plays = [("l2_other_nonce", lambda n: l2_hello(guess, bytes(16), 4)),
             ("l2_guessed_token", lambda n: l2_hello(guess, n, 4)),
             ("l2_silent", lambda n: b"")]
    socks = [socket.create_connection((host, int(port)), timeout=5) for _ in plays]
    print(json.dumps({"connected": len(socks)}), flush=True)
    for s, (name, answer) in zip(socks, plays):
        rec = {"target": target, "forgery": name}
        s.settimeout(30.0)
        got = b""
        try:
            while len(got) < 20:
                chunk = s.recv(20 - len(got))
                if not chunk:
                    break
                got += chunk
        except (socket.timeout, ConnectionResetError):
            pass
        rec["challenge"] = got[:4] == b"L2ch" and len(got) == 20
        hello = answer(got[4:20]) if rec["challenge"] else b""
        if hello:
            try:
                s.sendall(hello)
            except OSError:
                pass
        answer_bytes, closed = drain(s, 10.0)
        rec.update(answer=answer_bytes[:40], closed=closed, ack="L2ok" in answer_bytes)
        s.close()
        print(json.dumps(rec), flush=True)


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: forger.py attack TARGET... | nonce TARGET | replay TARGET PROOF | prove TARGET TOKEN | "
                 "visible TARGET")
    cmd, target = sys.argv[1], sys.argv[2]
    if cmd == "attack":
        attack(sys.argv[2:])
    elif cmd == "l2":
        l2_attack(target)
    elif cmd == "nonce":
        s = connect(target)
        print(nonce_of(read_line(s) or ""))
        s.close()
    elif cmd == "replay":
        print(json.dumps(forge(target, "replayed_proof", lambda n: [
            hello("agent", 2, proof=sys.argv[3]), {"type": "exit", "exit_code": 1, "signal": 0}])))
    elif cmd == "prove":
        print(json.dumps(forge(target, "other_attempts_token", lambda n: [
            hello("agent", 2, proof=proof(sys.argv[3], n, "agent", 2)), {"type": "exit", "exit_code": 1, "signal": 0}])))
    elif cmd == "visible":
        if target.startswith("@"):
            listed = any(line.rstrip().endswith(target) for line in open("/proc/net/unix"))
        else:
            port = "%04X" % int(target.rsplit(":", 1)[1])
            listed = any(f":{port} " in line for name in ("/proc/net/tcp", "/proc/net/tcp6")
                         for line in open(name))
        print("listed" if listed else "not listed")
    else:
        sys.exit(f"forger.py: unknown command {cmd}")


if __name__ == "__main__":
    main()
