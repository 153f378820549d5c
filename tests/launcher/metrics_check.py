#!/usr/bin/env python3
"""tests/launcher/metrics_check.py FILE [NAME=VALUE ...]: FILE is valid Prometheus text exposition
(format 0.0.4: # HELP / # TYPE lines, samples `name{labels} value`, each metric's TYPE before its
samples, no name twice), no sample carries a label Prometheus sets on the target itself (`job`,
`instance`, `__*`: at scrape time those would be overridden and the file's value renamed
`exported_*`), and each NAME (the sample of that name) has VALUE ("*" for any value); NAME
`ftl_job` means the label: every sample has ftl_job="VALUE".
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
    path, want = sys.argv[1], dict(a.split("=", 1) for a in sys.argv[2:])
    text = open(path).read()
    if not text.endswith("\n"):
        fail("the file does not end with a newline")
    types, samples, labels = {}, {}, {}
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
            if name in samples:
                fail(f"line {n}: {name} twice")
            samples[name] = value(m.group(3))
            labels[name] = m.group(2) or ""
            for lab in LABEL_NAME.findall(re.sub(r'"(?:[^"\\]|\\.)*"', '""', labels[name])):
                if lab in TARGET_LABELS or lab.startswith("__"):
                    fail(f"line {n}: label {lab!r} collides with Prometheus' own target label")
            if types[name] == "counter" and samples[name] < 0:
                fail(f"line {n}: counter {name} is negative")
    for name, v in want.items():
        if name == "ftl_job":
            want_lab = f'ftl_job="{v}"'
            if any(not re.search(rf'(?:^\{{|,){re.escape(want_lab)}', lab) for lab in labels.values()):
                fail(f"not every sample has the label {want_lab}")
            continue
        if name not in samples:
            fail(f"{name} is missing")
        if v != "*" and not (samples[name] == float(v) or (math.isnan(samples[name]) and v == "NaN")):
            fail(f"{name} is {samples[name]}, expected {v}")
    print(f"{path}: {len(samples)} samples, valid; checked {', '.join(want) or 'nothing else'}")


main()
