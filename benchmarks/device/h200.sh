#!/usr/bin/env bash
# One call on the lent H200 (the `device` tool): install, then run a stage; results under $OUT.
#   carry: [".whl", ".carry"]   (.whl from ../shared/device/wheels.sh; .carry/datasets = ../shared/datasets)
#   usage: bash benchmarks/device/h200.sh tests|bench|episodes|all
set -uo pipefail
stage="${1:-all}"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site \
  && python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >/dev/null || exit 1
export CUDA_HOME=/usr/local/cuda CUDA_GYM_DATA_DIR="$PWD/.carry/datasets" PYTHONUNBUFFERED=1
export CUDA_GYM_CACHE_DIR=/tmp/cuda_gym_cache TORCH_CUDA_ARCH_LIST=9.0
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  python3 -c "import torch,sys;print('python',sys.version.split()[0],'torch',torch.__version__,'cuda',torch.version.cuda)"
  cuda-gym doctor
} > "$OUT/env.txt" 2>&1
if [[ "$stage" == tests || "$stage" == all ]]; then
  python3 -m pytest -q -m gpu -p no:cacheprovider --junitxml="$OUT/gpu_tests.xml" -o timeout=900 ${PYTEST_ARGS:-} \
    2>&1 | tee "$OUT/gpu_tests.log" | tail -40
fi
if [[ "$stage" == bench || "$stage" == all ]]; then
  BENCH_OUT="$OUT/bench_build.json" python3 -m pytest -q -p no:cacheprovider benchmarks/bench_build.py \
    --benchmark-json="$OUT/bench_build_pytest.json" 2>&1 | tail -15
  BENCH_OUT="$OUT/bench_judge.json" python3 benchmarks/bench_judge.py 2>&1 | tail -15
  cuda-gym baselines measure --source builtin --device cuda:0 2>&1 | tail -25 > "$OUT/baselines_builtin.txt"
fi
if [[ "$stage" == episodes ]]; then
  CUDA_GYM_TRANSCRIPTS="$OUT/transcripts" python3 -m pytest -q -p no:cacheprovider tests/test_envs_gpu.py 2>&1 | tail -20
  cd "$OUT" && tar czf transcripts.tgz transcripts && rm -rf transcripts
fi
