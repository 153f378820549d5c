#!/usr/bin/env bash
# scripts/gpu-check.sh: the one device check of ftl's GPU paths (docs/gpu.md), run from the
# repository root on a machine with one (or more) NVIDIA GPU, within 8 minutes:
#   1. versions: nvidia-smi, the driver, nvcc, NCCL, cmake, mpirun, gcc;
#   2. every tool and library the build needs, checked at once: what is missing and how to carry it
#      to a machine that reaches no package registry (.deb files unpacked with dpkg -x);
#   3. configures build/gpu with -DFTL_WITH_CUDA=ON -DFTL_WITH_NCCL=ON and checks configure's
#      "ftl: CUDA ON (...), NCCL ON (...)" line, builds it, prints `ftl version`;
#   4. sm_90 machine code (H100/H200) in every binary with device code (cuobjdump --list-elf);
#   5. the GPU-labelled tests (ctest -L gpu): FAILS on any skip or missing test;
#   6. the example fine-tune on the GPU path against the CPU path (same data, base, seed): the
#      final held-out loss with the adapter must agree within |gpu - cpu| <= 0.02 * cpu + 0.01, and
#      the adapter must beat the base; plus ftl-allreduce-check with the automatic backend on one
#      rank (NCCL with host buffers) and on 2 ranks (more ranks than GPUs: the MPI fallback);
#      and the example's model FLOPs utilisation on the GPU (its peak from the table by NVML's name);
#   7. GPU health through the real NVML: `ftl gpus` (identity, ECC, remaps, throttling, NVLink,
#      XIDs, and the verdict), and the example's GPU run logged the same GPUs' health;
#   then a summary; exit 0 only when every check passed.
#
#   bash scripts/gpu-check.sh             the check (needs a GPU)
#   bash scripts/gpu-check.sh --dry-run   everything that needs no GPU (versions, dependencies, a
#                                         configure with CUDA and NCCL forced on into a scratch
#                                         folder, sm_90 in an existing build) and the plan
# Environment: FTL_GPU_BUILD_DIR (default build/gpu), FTL_DEPS_PREFIX (a folder .deb files were
# unpacked into with dpkg -x: added to PATH, PKG_CONFIG_PATH, CMAKE_PREFIX_PATH, LD_LIBRARY_PATH),
# NCCL_ROOT / NCCL_HOME (where NCCL is, if not in the usual places), OUT (where logs go; default
# build/gpu-check).
set -uo pipefail

DRY=0
case "${1:-}" in
  --dry-run) DRY=1 ;;
  "") ;;
  -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: bash scripts/gpu-check.sh [--dry-run]" >&2; exit 2 ;;
esac

T0=$(date +%s)
ROOT=$(pwd)
[ -f "$ROOT/CMakeLists.txt" ] && [ -f "$ROOT/rendezvous/gpu_seam.h" ] ||
  { echo "gpu-check: run me from the ftl repository root" >&2; exit 2; }
BUILD=${FTL_GPU_BUILD_DIR:-$ROOT/build/gpu}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
LOGS=${OUT:-$ROOT/build/gpu-check}
mkdir -p "$LOGS"
SUMMARY=$LOGS/summary.txt
: >"$SUMMARY"
JOBS=$(nproc 2>/dev/null || echo 4)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH="$CUDA_HOME/bin:$PATH"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ -n "${FTL_DEPS_PREFIX:-}" ]; then
  P=$FTL_DEPS_PREFIX
  export PATH="$P/usr/bin:$PATH"
  export PKG_CONFIG_PATH="$P/usr/lib/x86_64-linux-gnu/pkgconfig:$P/usr/share/pkgconfig:$P/usr/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export CMAKE_PREFIX_PATH="$P/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export LD_LIBRARY_PATH="$P/usr/lib/x86_64-linux-gnu:$P/usr/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export CPATH="$P/usr/include:$P/usr/include/hdf5/serial${CPATH:+:$CPATH}"
fi
FAILS=0

elapsed() { echo $(($(date +%s) - T0)); }
note() { echo "[$(elapsed)s] $*" | tee -a "$SUMMARY"; }
pass() { note "PASS: $*"; }
fail() { note "FAIL: $*"; FAILS=$((FAILS + 1)); }
finish() {
  note "$([ $DRY = 1 ] && echo 'dry run ' )done in $(elapsed)s: $FAILS failure(s); logs in $LOGS"
  echo "===== summary ====="
  cat "$SUMMARY"
  exit $((FAILS > 0 ? 1 : 0))
}

# ---- 1. versions ----------------------------------------------------------------------------------
nccl_header() { # prints the first nccl.h found
  local d
  for d in ${NCCL_ROOT:+"$NCCL_ROOT/include"} ${NCCL_HOME:+"$NCCL_HOME/include"} "$CUDA_HOME/include" \
           /usr/include /usr/local/include ${FTL_DEPS_PREFIX:+"$FTL_DEPS_PREFIX/usr/include"}; do
    [ -f "$d/nccl.h" ] && { echo "$d/nccl.h"; return 0; }
  done
  return 1
}
nccl_library() { # prints the first libnccl.so (or .so.2) found
  local d f
  for d in ${NCCL_ROOT:+"$NCCL_ROOT/lib" "$NCCL_ROOT/lib64"} ${NCCL_HOME:+"$NCCL_HOME/lib" "$NCCL_HOME/lib64"} \
           "$CUDA_HOME/lib64" "$CUDA_HOME/lib" /usr/lib/x86_64-linux-gnu /usr/local/lib \
           ${FTL_DEPS_PREFIX:+"$FTL_DEPS_PREFIX/usr/lib/x86_64-linux-gnu"}; do
    for f in "$d/libnccl.so" "$d/libnccl.so.2"; do [ -e "$f" ] && { echo "$f"; return 0; }; done
  done
  return 1
}
{
  echo "== uname: $(uname -srm)"
  echo "== os: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  echo "== nvidia-smi"; if command -v nvidia-smi >/dev/null; then nvidia-smi 2>&1 | head -20; else echo "not found"; fi
  echo "== driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1 || true)$(cat /proc/driver/nvidia/version 2>/dev/null | head -1)"
  echo "== nvcc: $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*, V[0-9.]*' || echo 'not found')"
  h=$(nccl_header) && echo "== NCCL header: $h $(grep -E '^#define NCCL_(MAJOR|MINOR|PATCH) ' "$h" | awk '{printf "%s%s", sep, $3; sep="."}')" ||
    echo "== NCCL header: not found"
  echo "== NCCL library: $(nccl_library || echo 'not found')"
  echo "== cmake: $(cmake --version 2>/dev/null | head -1)"
  echo "== mpirun: $(mpirun --version 2>/dev/null | head -1)"
  echo "== gcc: $(gcc --version 2>/dev/null | head -1)"
} >"$LOGS/versions.txt" 2>&1
cat "$LOGS/versions.txt"

# ---- 2. dependencies, all at once -----------------------------------------------------------------
# Each line: what, how it is checked, the Debian 12 package(s) that carry it.
missing=()
carry=()
need() { # need WHAT DEBS CHECK...
  local what=$1 debs=$2
  shift 2
  if ! "$@" >/dev/null 2>&1; then
    missing+=("$what")
    [ -n "$debs" ] && read -r -a more <<<"$debs" && carry+=("${more[@]}")
  fi
}
have_header() { local h; for h in "$@"; do [ -f "/usr/include/$h" ] || [ -f "/usr/local/include/$h" ] ||
  { [ -n "${FTL_DEPS_PREFIX:-}" ] && [ -f "$FTL_DEPS_PREFIX/usr/include/$h" ]; } && return 0; done; return 1; }
need cmake cmake command -v cmake
need "C compiler (cc)" "gcc libc6-dev" command -v cc
need "C++ compiler (nvcc's host compiler)" g++ command -v g++
need pkg-config pkg-config command -v pkg-config
need mpicc libopenmpi-dev command -v mpicc
need mpirun openmpi-bin command -v mpirun
need HDF5 libhdf5-dev have_header hdf5/serial/hdf5.h hdf5.h
need jansson libjansson-dev pkg-config --exists jansson
need libyaml libyaml-dev pkg-config --exists yaml-0.1
need libarchive libarchive-dev have_header archive.h
need xxhash libxxhash-dev have_header xxhash.h
need "openssl (libcrypto)" libssl-dev pkg-config --exists libcrypto
need zstd libzstd-dev pkg-config --exists libzstd
need "CUDA toolkit (nvcc)" "" command -v nvcc
need "CUDA runtime (cuda_runtime.h)" "" test -f "$CUDA_HOME/include/cuda_runtime.h"
# cuobjdump is optional: without it scripts/fatbin-archs.py reads the fatbin headers (objcopy).
need "objcopy and ar (binutils)" binutils command -v objcopy
need "NCCL header (nccl.h)" "" nccl_header
need "NCCL library (libnccl.so or libnccl.so.2)" "" nccl_library
if [ $DRY = 0 ]; then
  need "NVIDIA driver (nvidia-smi sees a GPU)" "" nvidia-smi -L
fi
if [ ${#missing[@]} -gt 0 ]; then
  fail "missing: ${missing[*]}"
  {
    echo "How to carry them to a machine with no package registry:"
    if [ ${#carry[@]} -gt 0 ]; then
      echo "  on a Debian 12 machine with the registry:   apt-get download ${carry[*]}"
      echo "    (and their missing dependencies: apt-cache depends --recurse --no-recommends PACKAGE)"
      echo "  copy the .deb files here, then:  for f in *.deb; do dpkg -x \"\$f\" /opt/ftl-deps; done"
      echo "  and run:  FTL_DEPS_PREFIX=/opt/ftl-deps bash scripts/gpu-check.sh   (or dpkg -i *.deb as root)"
    fi
    case " ${missing[*]} " in *NCCL*)
      echo "  NCCL: apt-get download libnccl2 libnccl-dev from NVIDIA's CUDA repository (matching CUDA $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | cut -d' ' -f2)),"
      echo "    dpkg -x both into /opt/nccl and set NCCL_ROOT=/opt/nccl/usr (configure also finds libnccl.so.2 alone);"
      echo "    or the nvidia-nccl-cu13 wheel (pip download nvidia-nccl-cu13; unzip it; NCCL_ROOT=<unzipped>/nvidia/nccl)" ;;
    esac
    case " ${missing[*]} " in *"CUDA toolkit"*|*"CUDA runtime"*)
      echo "  CUDA: the toolkit (cuda-toolkit-13-0 from NVIDIA's repository, or the runfile with --toolkit --silent)"
      echo "    installed under /usr/local/cuda, or CUDA_HOME=<its folder>" ;;
    esac
    case " ${missing[*]} " in *driver*)
      echo "  NVIDIA driver: part of the machine's image; this check cannot carry it." ;;
    esac
  } | tee -a "$SUMMARY"
  [ $DRY = 1 ] || finish
else
  pass "every tool and library present: cmake compilers mpicc mpirun HDF5 jansson yaml libarchive xxhash openssl zstd CUDA NCCL binutils"
fi

# ---- 3. configure (and, for real, build) ----------------------------------------------------------
configure() { # configure DIR: CUDA and NCCL forced on; the verdict line from configure
  timeout 180 cmake -S "$ROOT" -B "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFTL_WITH_CUDA=ON -DFTL_WITH_NCCL=ON \
    -DFTL_WERROR=OFF -DCMAKE_CUDA_COMPILER="$CUDA_HOME/bin/nvcc" >"$LOGS/configure.log" 2>&1
}
check_configure() {
  local line
  line=$(grep -o "ftl: CUDA .*" "$LOGS/configure.log" | head -1)
  note "configure: ${line:-no 'ftl: CUDA' line}"
  case "$line" in "ftl: CUDA ON ("*"NCCL ON ("*) pass "configure compiled in CUDA and NCCL" ;;
    *) fail "configure did not compile in both CUDA and NCCL (configure.log)" ;; esac
  grep -q "nvcc does not work through CMake" "$LOGS/configure.log" && fail "CMake cannot use nvcc: no CUDA fine-tune path"
}
# sm_90 in every binary with device code: the fine-tune's kernels (model_cuda.cu) are linked into
# these; NCCL's and cudart's own code are shared libraries, checked by running the tests.
check_sm90() { # check_sm90 BUILDDIR
  local f archs n=0 how=cuobjdump
  # The toolkit on these machines ships no cuobjdump: then the fatbin headers are read directly.
  command -v cuobjdump >/dev/null || how="scripts/fatbin-archs.py"
  for f in "$1"/examples/finetune/libftl_finetune_cuda.a "$1"/bin/ftl-finetune "$1"/bin/finetune_cuda \
           "$1"/bin/ftl-finetune-eval; do
    [ -e "$f" ] || continue
    if [ "$how" = cuobjdump ]; then
      archs=$(cuobjdump --list-elf "$f" 2>/dev/null | grep -o 'sm_[0-9]*' | sort -u | tr '\n' ' ')
    else
      archs=$(python3 "$ROOT/scripts/fatbin-archs.py" "$f" | cut -d' ' -f2- | tr -s ' ')
    fi
    [ -n "$archs" ] || continue # no device code in this one
    n=$((n + 1))
    note "device code in ${f#"$ROOT"/} ($how): ${archs}"
    grep -qw sm_90 <<<"$archs" || fail "no sm_90 machine code in $f"
  done
  [ $n -gt 0 ] && pass "sm_90 machine code in the $n file(s) with device code" || fail "no file with device code in $1"
}

PLAN="plan on a GPU machine (build jobs: nproc):
  configure $BUILD with -DFTL_WITH_CUDA=ON -DFTL_WITH_NCCL=ON, check 'ftl: CUDA ON (...), NCCL ON (...)'
  cmake --build $BUILD; ftl version
  cuobjdump --list-elf (or scripts/fatbin-archs.py without it): sm_90 in libftl_finetune_cuda.a, ftl-finetune, finetune_cuda
  ctest -L gpu: test_gpu_nccl_allreduce, test_gpu_nccl_allreduce_2ranks (skip allowed only with 1 GPU), ckpt_device,
    finetune_cuda, finetune_cuda_job: any other skip fails
  ftl-allreduce-check, automatic backend: 1 rank (NCCL chosen, host buffers through MPI), 2 ranks (MPI fallback notice)
  example fine-tune, 1 rank, --device cuda against --device cpu: held-out loss with the adapter
    |gpu - cpu| <= 0.02 * cpu + 0.01, and below the base model's
  ftl gpus: the real NVML read and each GPU's verdict; the GPU run's gpu_health events name the same GPUs"

if [ $DRY = 1 ]; then
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/ftl-gpu-check-configure.XXXXXX")
  if configure "$scratch"; then check_configure; else fail "configure failed (configure.log)"; tail -20 "$LOGS/configure.log"; fi
  rm -rf "$scratch"
  if [ -x "$BUILD/bin/ftl" ]; then
    note "existing build $BUILD: $("$BUILD/bin/ftl" version | tr '\n' ';' | sed 's/;  */; /g')"
    check_sm90 "$BUILD"
  else
    note "no existing build in $BUILD: sm_90 check left for the real run"
  fi
  [ -e /dev/nvidia0 ] && note "a GPU device node is here: run without --dry-run" || note "no /dev/nvidia*: the GPU steps are left for a GPU machine"
  echo "$PLAN" | tee -a "$SUMMARY"
  finish
fi

configure "$BUILD" || { tail -30 "$LOGS/configure.log"; fail "configure failed (configure.log)"; finish; }
check_configure
timeout 300 cmake --build "$BUILD" -j "$JOBS" >"$LOGS/build.log" 2>&1 ||
  { grep -E "error|Error" "$LOGS/build.log" | head -30; fail "build failed (build.log)"; finish; }
pass "built $BUILD in $(elapsed)s ($(grep -c 'warning:' "$LOGS/build.log") compiler warnings)"
"$BUILD/bin/ftl" version | tee -a "$SUMMARY"
check_sm90 "$BUILD"

# ---- 5. the GPU-labelled tests --------------------------------------------------------------------
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
expected="test_gpu_nccl_allreduce test_gpu_nccl_allreduce_2ranks ckpt_device finetune_cuda finetune_cuda_job"
listed=" $(cd "$BUILD" && ctest -N -L gpu | sed -n 's/.*Test *#[0-9]*: *//p' | tr '\n' ' ') "
for t in $expected; do
  case "$listed" in *" $t "*) ;; *) fail "gpu test $t is not registered (a CUDA/NCCL part was not built)" ;; esac
done
(cd "$BUILD" && timeout 300 ctest -L gpu --output-on-failure --timeout 240) >"$LOGS/ctest-gpu.log" 2>&1
crc=$?
grep -E "Test +#[0-9]+: " "$LOGS/ctest-gpu.log" | sed 's/^ *[0-9]*\/[0-9]* //' | tee -a "$SUMMARY"
skipped=$(grep -E "\*\*\*Skipped|Not Run" "$LOGS/ctest-gpu.log" | sed -n 's/.*Test *#[0-9]*: *\([^ ]*\).*/\1/p' | tr '\n' ' ')
for t in $skipped; do
  if [ "$t" = test_gpu_nccl_allreduce_2ranks ] && [ "$GPUS" -lt 2 ]; then
    note "skipped as planned on $GPUS GPU: $t (needs 2 GPUs)"
  else
    fail "gpu test skipped on a GPU machine: $t"
  fi
done
[ $crc -eq 0 ] && pass "ctest -L gpu exited 0" || fail "ctest -L gpu exited $crc (ctest-gpu.log)"

# ---- 6. the programs: allreduce check and the example fine-tune, GPU against CPU ------------------
EX=$(mktemp -d "${TMPDIR:-/tmp}/ftl-gpu-example.XXXXXX")
export PATH="$BUILD/bin:$PATH" OMP_NUM_THREADS=1 FTL_LOG_LEVEL=warn
unset FTL_BACKEND
(cd "$EX" && timeout 60 ftl run -n 1 --run-dir a1 -- ftl-allreduce-check --iterations 3 --max-kib 256) >"$LOGS/allreduce-1.log" 2>&1 &&
  pass "ftl-allreduce-check, 1 rank, automatic backend (NCCL, host buffers through MPI)" ||
  fail "ftl-allreduce-check on 1 rank (allreduce-1.log)"
(cd "$EX" && FTL_LOG_LEVEL=warn timeout 60 ftl run -n 2 --run-dir a2 -- ftl-allreduce-check --iterations 3 --max-kib 256) >"$LOGS/allreduce-2.log" 2>&1 &&
  pass "ftl-allreduce-check, 2 ranks on $GPUS GPU(s), automatic backend" || fail "ftl-allreduce-check on 2 ranks (allreduce-2.log)"
[ "$GPUS" -lt 2 ] && { grep -q "more ranks than GPUs" "$LOGS/allreduce-2.log" &&
  pass "2 ranks on 1 GPU: the MPI fallback notice" || fail "2 ranks on 1 GPU: no 'more ranks than GPUs' notice (allreduce-2.log)"; }

ARGS=(--data data --base data/base.h5 --pretrain-steps 40 --pretrain-batch 16 --layers 2 --embd 64 --heads 4
      --steps 120 --batch 16 --rank 8 --alpha 16 --lr 1e-2 --log-every 40 --seed 1 --ckpt-every 0)
(
  cd "$EX" || exit 1
  ftl-finetune-data --out data --pretrain 2048 --train 2048 --heldout 256 >/dev/null || exit 1
  timeout 120 ftl run -n 1 --run-dir base -- ftl-finetune "${ARGS[@]}" --steps 0 --device cpu >base.out 2>&1 || exit 2
  timeout 120 ftl run -n 1 --run-dir gpu -- ftl-finetune "${ARGS[@]}" --device cuda >gpu.out 2>&1 || exit 3
  timeout 180 ftl run -n 1 --run-dir cpu -- ftl-finetune "${ARGS[@]}" --device cpu >cpu.out 2>&1 || exit 4
) >"$LOGS/example.log" 2>&1
erc=$?
cat "$EX"/base.out "$EX"/gpu.out "$EX"/cpu.out >>"$LOGS/example.log" 2>/dev/null
if [ $erc -ne 0 ]; then
  tail -20 "$LOGS/example.log"
  fail "example fine-tune failed at stage $erc (1 data, 2 base, 3 GPU, 4 CPU; example.log)"
else
  grep -q "GPU (CUDA path)" "$EX/gpu.out" && pass "example took the CUDA path" || fail "example did not take the CUDA path"
  heldout() { grep -o "base model: loss [0-9.]*, exact match [0-9.]*% | with the adapter: loss [0-9.]*" "$1" | tail -1; }
  g=$(heldout "$EX/gpu.out") c=$(heldout "$EX/cpu.out")
  note "held-out, GPU: $g"
  note "held-out, CPU: $c"
  gb=${g#base model: loss } gb=${gb%%,*} ga=${g##* } ca=${c##* }
  if [ -n "$g" ] && [ -n "$c" ] && awk -v g="$ga" -v c="$ca" 'BEGIN { d = g - c; if (d < 0) d = -d; exit !(d <= 0.02 * c + 0.01) }'; then
    pass "GPU and CPU held-out loss with the adapter agree: $ga vs $ca (tolerance 0.02 x CPU + 0.01)"
  else
    fail "GPU and CPU held-out loss with the adapter differ: '$ga' vs '$ca' (tolerance 0.02 x CPU + 0.01)"
  fi
  [ -n "$g" ] && awk -v b="$gb" -v a="$ga" 'BEGIN { exit !(a < b) }' && pass "GPU adapter beats the base ($ga < $gb)" ||
    fail "GPU adapter does not beat the base ('$ga' vs '$gb')"
  # Useful work: the example reports its FLOPs (examples/finetune/model_flops.c); on the GPU the peak
  # is the table's for NVML's name (docs/gpu.md "Peak FLOPS table"), never the CPU's.
  ftl status "$EX/gpu" --json >"$LOGS/gpu-status.json" 2>&1
  if python3 - "$LOGS/gpu-status.json" <<'PY' >>"$SUMMARY" 2>&1; then
import json, sys
u = json.load(open(sys.argv[1]))["useful_work"]
assert u, "no useful_work: the example reported no FLOPs"
print("example on the GPU:", u["text"])
assert u["peak_source"] != "cpu", "the peak is the CPU's on a GPU run: " + u["peak"]
assert u["mfu"] is not None and 0 < u["mfu"] <= 1, u
PY
    pass "the example's MFU on the GPU, against the table's peak for this GPU"
  else
    tail -3 "$SUMMARY"
    fail "the example's MFU on the GPU (gpu-status.json)"
  fi
fi

# ---- 7. GPU health through the real NVML (docs/gpu.md "GPU health (NVML)") ------------------------
# `ftl gpus` reads every GPU twice, 2 s apart, and judges it as a rank agent does; the example's GPU
# run above must have logged its host's first health check with the same UUIDs.
ftl gpus --interval 2000 >"$LOGS/gpus.txt" 2>&1
grc=$?
ftl gpus --json >"$LOGS/gpus.json" 2>&1
cat "$LOGS/gpus.txt" | tee -a "$SUMMARY"
if python3 - "$LOGS/gpus.json" "$EX/gpu/events.jsonl" <<'PY' >>"$SUMMARY" 2>&1; then
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["available"], "NVML not available: " + doc["why"]
assert doc["gpus"], "NVML sees no GPU"
for g in doc["gpus"]:
    assert g["uuid"].startswith("GPU-") and g["name"], g
    unread = {k: v for k, v in g["not_read"].items()}
    print(f"NVML: GPU {g['index']} {g['uuid']} {g['name']}: {g['verdict']} ({g['reason']}); "
          f"{g['temperature_c']} C, {g['power_mw'] / 1000:.0f} W; not read: {unread or 'nothing'}")
seen = set()
for line in open(sys.argv[2]):
    e = json.loads(line)
    if e.get("event") == "gpu_health":
        seen |= {x["uuid"] for x in e["gpus"]}
want = {g["uuid"] for g in doc["gpus"]}
assert seen and seen <= want, f"the run's gpu_health events name {seen}, NVML {want}"
print(f"ftl run's health check named the same GPUs: {sorted(seen)}")
PY
  pass "real NVML read, verdicts given (ftl gpus exit $grc: 0 healthy, 6 degraded, 1 failed)"
else
  tail -5 "$SUMMARY"
  fail "the real NVML read (gpus.json, gpus.txt)"
fi
rm -rf "$EX"
[ "$(elapsed)" -le 480 ] || fail "took $(elapsed)s, over the 8-minute budget"
finish
