#!/usr/bin/env bash
# `cuda-gym tasks validate` over KernelBench levels 1-3 and all of Ops-6K on one H200, in one call of at
# most 8 minutes. Results under $OUT: kernelbench.jsonl + ops6k.jsonl (every rule but compile),
# compile.jsonl (torch.compile on a random sample), *.summary.txt/json, REPORT.txt (coverage).
#   carry: [".whl", ".carry"]   (.whl from ../shared/device/wheels.sh; .carry/datasets = ../shared/datasets)
#   usage: bash benchmarks/device/validate_tasks.sh
#   resume: copy a previous run's *.jsonl into .carry/validation/ and run again: finished tasks are skipped.
# Budget (seconds, each stage cut by SIGINT at its limit; every finished task is already in its report):
#   A  KernelBench L1-3, 250 tasks, all rules but compile ............ STAGE_A_S (200)
#   B  torch.compile on 24 KernelBench + 40 Ops-6K tasks (random) ..... STAGE_B_S (100)
#   C  Ops-6K, 5648 unique tasks in a seeded random order ............. the rest (460 s in all)
# Timings hold a device lock (one task on the GPU at a time, while other workers import, trace and
# compile), so a cut-short stage C has validated a uniform random sample of Ops-6K. OPS6K_EXCLUSIVE=0
# drops the lock in stage C: more tasks covered, timings shared with other workers' kernels.
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
T0=$(date +%s)
source "$(dirname "$0")/setup.sh"
export TORCHINDUCTOR_COMPILE_THREADS=1
for f in .carry/validation/*.jsonl; do [[ -f "$f" ]] && cp "$f" "$OUT/"; done
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc
  python3 -c "import torch;print('torch',torch.__version__,'cuda',torch.version.cuda)"; } > "$OUT/env.txt" 2>&1

JOBS="${JOBS:-14}"
COMMON=(--device cuda:0 --min-ms 1 --max-ms 100 --memory-budget-gib 40 --timing-calls 3 --seeds 3)
run() {  # run LIMIT_S NAME args...: one validate stage, its log, and how long it took
  local limit=$1 name=$2; shift 2
  local t=$(date +%s)
  timeout -s INT -k 20 "$limit" cuda-gym tasks validate "$@" > "$OUT/$name.stage.log" 2>&1
  echo "stage $name: exit $? after $(( $(date +%s) - t )) s (limit $limit s)" | tee -a "$OUT/REPORT.txt"
}
run "${STAGE_A_S:-200}" kernelbench kernelbench --level 1 --level 2 --level 3 "${COMMON[@]}" \
  --rules eager,deterministic,varies,timing,memory,static_shape,similarity --jobs "$JOBS" --timeout-s 120 \
  --report "$OUT/kernelbench.jsonl"
run "${STAGE_B_S:-100}" compile_kernelbench kernelbench --level 1 --level 2 --level 3 --sample 24 --sample-seed 0 \
  --device cuda:0 --rules memory,compile --memory-budget-gib 8 --jobs 12 --timeout-s 100 --report "$OUT/compile.jsonl" &
PID_B=$!
sleep 1
run "${STAGE_B_S:-100}" compile_ops6k ops6k --sample 40 --sample-seed 0 \
  --device cuda:0 --rules memory,compile --memory-budget-gib 8 --jobs 4 --timeout-s 100 --report "$OUT/compile_ops6k.jsonl"
wait "$PID_B"
cat "$OUT/compile_ops6k.jsonl" >> "$OUT/compile.jsonl" 2>/dev/null; rm -f "$OUT/compile_ops6k.jsonl"
LEFT=$(( 460 - ($(date +%s) - T0) ))
run "$LEFT" ops6k ops6k --sample 6000 --sample-seed 0 "${COMMON[@]}" \
  --rules eager,deterministic,varies,timing,memory,static_shape,similarity --jobs "$JOBS" --timeout-s 60 \
  $([[ "${OPS6K_EXCLUSIVE:-1}" == 0 ]] && echo --no-exclusive-device) --report "$OUT/ops6k.jsonl"

for name in kernelbench ops6k compile; do
  [[ -f "$OUT/$name.jsonl" ]] || continue
  cuda-gym tasks report "$OUT/$name.jsonl" --limit 40 --summary-json "$OUT/$name.summary.json" > "$OUT/$name.summary.txt" 2>&1
  { echo; echo "== $name: $(wc -l < "$OUT/$name.jsonl") records"; cat "$OUT/$name.summary.txt"; } >> "$OUT/REPORT.txt"
done
python3 - "$OUT" >> "$OUT/REPORT.txt" <<'EOF'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
for name, total in (("kernelbench", 250), ("ops6k", 5648)):
    path = out / f"{name}.jsonl"
    ids = {json.loads(l)["task_id"] for l in path.read_text().splitlines() if l.strip()} if path.exists() else set()
    print(f"coverage {name}: {len(ids)} of {total} unique tasks validated")
EOF
echo "total $(( $(date +%s) - T0 )) s" >> "$OUT/REPORT.txt"
cat "$OUT/REPORT.txt"
