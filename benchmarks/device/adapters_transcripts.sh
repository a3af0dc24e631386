#!/usr/bin/env bash
# One scripted episode through each adapter (TRL, OpenEnv, verl) on CudaKernel-Builtin-v0; transcripts under $OUT.
#   carry: [".whl"]  (.whl: ../shared/device/wheels.sh plus the OpenEnv wheels, see docs/adapters.md "On the H200")
#   usage: bash benchmarks/device/adapters_transcripts.sh      (about 3-5 minutes on the H200)
#   verl needs Ray, whose wheel is over one call's carry: benchmarks/device/ray_wheel.sh brings it in two calls.
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
source "$(dirname "$0")/setup.sh"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv
  python3 -c "import torch,sys;print('python',sys.version.split()[0],'torch',torch.__version__,'cuda',torch.version.cuda)"
} > "$OUT/env.txt" 2>&1
timeout -s INT 460 python3 benchmarks/device/adapters_transcripts.py 2>&1 | tee "$OUT/adapters.log" | grep -v '^ \|^{\|^}' | tail -20
