#!/usr/bin/env python3
"""tests/launcher/metrics_check.py FILE [NAME=VALUE ...]: FILE is valid Prometheus text exposition
(format 0.0.4: # HELP / # TYPE lines, samples `name{labels} value`, each metric's TYPE before its
samples, no series (name and labels) twice, a metric's samples together), no sample carries a
label Prometheus sets on the target itself (`job`, `instance`, `__*`: at scrape time those would be
overridden and the file's value renamed `exported_*`), and each NAME (the sample of that name) has
VALUE ("*" for any value); NAME{LABEL=V} picks, of a metric with several samples, the one whose
labels have LABEL="V" (`ftl_gpu_health{gpu=1}=1`); NAME `ftl_job` means the label: every sample
has ftl_job="VALUE".
Prints what it checked; exits 1 on the first problem."""
import math
import re
import sys

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
LABEL_NAME = re.compile(r'(?:^\{|,)([a-zA-Z_][a-zA-Z0-9_]*)="')
TARGET_LABELS = ("job", "instance")
SAMPLE = re.compile(rf"^({NAME})(\{{(?:{LABEL}(?:,{LABEL})*)?,?\}})? (\S+)( -?\d+)?$")


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def value(text):
    if text in ("NaN", "+Inf", "-Inf"):
        return float(text.replace("Inf", "inf").replace("NaN", "nan"))
    try:
        return float(text)
    except ValueError:
        fail(f"not a number: {text!r}")


def main():
    path, want = sys.argv[1], dict(a.rsplit("=", 1) if "{" in a else a.split("=", 1) for a in sys.argv[2:])
    text = open(path).read()
    if not text.endswith("\n"):
        fail("the file does not end with a newline")
    types, samples, labels, series, last = {}, {}, {}, set(), None
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("# HELP "):
            if not re.match(rf"^# HELP {NAME} .*$", line):
                fail(f"line {n}: bad HELP: {line!r}")
        elif line.startswith("# TYPE "):
            m = re.match(rf"^# TYPE ({NAME}) (counter|gauge|histogram|summary|untyped)$", line)
            if not m:
                fail(f"line {n}: bad TYPE: {line!r}")
            if m.group(1) in types:
                fail(f"line {n}: TYPE of {m.group(1)} twice")
            types[m.group(1)] = m.group(2)
        elif line.startswith("#") or not line:
            continue
        else:
            m = SAMPLE.match(line)
            if not m:
                fail(f"line {n}: not a sample: {line!r}")
            name = m.group(1)
            if name not in types:
                fail(f"line {n}: {name} has no TYPE before it")
            if (name, m.group(2)) in series:
                fail(f"line {n}: {name}{m.group(2) or ''} twice")
            if name in samples and last != name:
                fail(f"line {n}: {name}'s samples are not together")
            series.add((name, m.group(2)))
            last = name
            key = name if name not in samples else f"{name}{m.group(2) or ''}"
            samples[key] = value(m.group(3))
            labels[key] = m.group(2) or ""
            for lab in LABEL_NAME.findall(re.sub(r'"(?:[^"\\]|\\.)*"', '""', labels[key])):
                if lab in TARGET_LABELS or lab.startswith("__"):
                    fail(f"line {n}: label {lab!r} collides with Prometheus' own target label")
            if types[name] == "counter" and samples[key] < 0:
                fail(f"line {n}: counter {name} is negative")
    for name, v in want.items():
        if name == "ftl_job":
            want_lab = f'ftl_job="{v}"'
            if any(not re.search(rf'(?:^\{{|,){re.escape(want_lab)}', lab) for lab in labels.values()):
                fail(f"not every sample has the label {want_lab}")
            continue
        sel = re.match(r"^(.*)\{(\w+)=(.*)\}$", name)
        if sel:
            keys = [k for k in labels if re.sub(r"\{.*", "", k) == sel.group(1)
                    and re.search(rf'(?:^\{{|,){sel.group(2)}="{re.escape(sel.group(3))}"', labels[k])]
            if len(keys) != 1:
                fail(f"{name}: {len(keys)} samples match, expected one")
            got = samples[keys[0]]
        elif name not in samples:
            fail(f"{name} is missing")
        else:
            got = samples[name]
        if v != "*" and not (got == float(v) or (math.isnan(got) and v == "NaN")):
            fail(f"{name} is {got}, expected {v}")
    print(f"{path}: {len(samples)} samples, valid; checked {', '.join(want) or 'nothing else'}")


main()
