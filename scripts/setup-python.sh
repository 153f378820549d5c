#!/usr/bin/env bash
# scripts/setup-python.sh: makes the project's Python virtual environment for the Hugging Face side
# (ftl.hf, examples/hf-lora, tests/python/hf_*): `/usr/bin/python3 -m venv --system-site-packages`
# at $FTL_VENV (default .venv at the repository root, ignored by git) with the exact versions of
# python/requirements-hf.txt. Run by scripts/test.sh and scripts/run-example.sh after
# scripts/setup-deps.sh (which installs python3-venv, python3-torch and the Debian modules the
# pins rely on).
#
# Why --system-site-packages: the venv keeps Debian's python3-torch 1.13 (CPU, 145 MB), numpy 1.24
# and h5py. PyPI's default torch wheel for x86-64 is a CUDA build of several GB; it is never
# installed here (every pin goes in with --no-deps: docs/python.md, "The Hugging Face stack").
#
# Idempotent and quiet when done: a stamp in the venv holds the digest of the requirements file
# and of this script; when it matches and the pinned modules import at their pinned versions,
# nothing is installed and nothing is fetched, so a second run takes under a second and works
# offline. Exit code 0 only when the venv is ready.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${FTL_VENV:-$PWD/.venv}
REQ=$PWD/python/requirements-hf.txt
BASE_PY=/usr/bin/python3
want=$(cat "$REQ" "$0" | sha256sum | cut -d' ' -f1)

# check [import]: every pin is installed in the venv at its pinned version and torch is Debian's
# (a torch under the venv's own site-packages would mean a CUDA wheel slipped in); with `import`,
# the modules are imported too (a few seconds: torch and transformers), which is done after an
# install, not on the fast path.
check() {
  "$VENV/bin/python" - "$REQ" "${1:-}" <<'PY'
import importlib.metadata as md, importlib.util, sys
bad = []
for line in open(sys.argv[1]):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    name, version = line.split("==")
    try:
        have = md.version(name)
    except md.PackageNotFoundError:
        have = None
    if have != version:
        bad.append(f"{name}: want {version}, have {have}")
torch_at = importlib.util.find_spec("torch").origin
if not torch_at.startswith("/usr/lib/python3/dist-packages/"):
    bad.append(f"torch is not Debian's: {torch_at}")
if sys.argv[2] == "import" and not bad:
    import torch, transformers, peft, safetensors, tokenizers, huggingface_hub, accelerate  # noqa: F401
if bad:
    sys.exit("ftl setup-python: " + "; ".join(bad))
PY
}

if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.ftl-stamp" 2>/dev/null)" = "$want" ] && check 2>/dev/null; then
  exit 0
fi
"$BASE_PY" -c 'import torch, numpy' 2>/dev/null ||
  { echo "ftl setup-python: $BASE_PY has no torch or numpy (scripts/setup-deps.sh installs them)" >&2; exit 1; }
echo "ftl setup-python: making $VENV from $REQ" >&2
[ -x "$VENV/bin/python" ] || "$BASE_PY" -m venv --system-site-packages "$VENV"
rm -f "$VENV/.ftl-stamp"
# --no-deps: the file lists every dependency itself (see its header); PIP_NO_INPUT: CI has no tty.
PIP_NO_INPUT=1 nice -n 10 "$VENV/bin/python" -m pip install --quiet --no-deps --disable-pip-version-check -r "$REQ"
check import
echo "$want" >"$VENV/.ftl-stamp"
echo "ftl setup-python: ready: $VENV/bin/python" >&2
