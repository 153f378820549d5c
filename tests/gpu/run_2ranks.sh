#!/usr/bin/env bash
# tests/gpu/run_2ranks.sh BIN MPIEXEC: test_gpu_nccl_allreduce on 2 ranks, one GPU each. NCCL cannot
# put two ranks on one device, so with one GPU the case is skipped (77) with a message; without a
# GPU skipped, with a broken one failed (the binary's --count decides: gpu_test.h).
set -uo pipefail
bin=$1
mpiexec=$2
count=$("$bin" --count) || exit $?
if [ "$count" -lt 2 ]; then
  echo "skipped: the 2-rank case needs 2 GPUs, this machine has $count"
  exit 77
fi
export OMPI_MCA_btl=self,vader
exec "$mpiexec" --oversubscribe -n 2 "$bin"
