#!/usr/bin/env bash
# The executor benchmark on the lent H200 (issue 14), one call: serial vs LocalGPUPool, then the fault batch.
#   carry: [".whl", ".carry"]   (.whl from ../shared/device/wheels.sh; .carry/datasets/kernelbench = ../shared/datasets/kernelbench)
#   usage: bash benchmarks/device/pool_h200.sh      results: $OUT/bench_pool.json, $OUT/bench_pool.log, $OUT/env.txt
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
source "$(dirname "$0")/setup.sh"
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  python3 -c "import torch,sys;print('python',sys.version.split()[0],'torch',torch.__version__,'cuda',torch.version.cuda)"
  nproc
} > "$OUT/env.txt" 2>&1
# SIGINT at the limit: the JSON holds every step that finished (it is rewritten after each).
BENCH_OUT="$OUT/bench_pool.json" timeout -s INT "${BENCH_POOL_LIMIT_S:-460}" python3 benchmarks/bench_pool.py \
  > "$OUT/bench_pool.log" 2>&1
echo "exit $?"; tail -30 "$OUT/bench_pool.log"
nvidia-smi --query-gpu=memory.used --format=csv >> "$OUT/env.txt" 2>&1
