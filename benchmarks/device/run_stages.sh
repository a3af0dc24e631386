#!/usr/bin/env bash
# Several device scripts in one call on the lent H200, in the order given, under one deadline: each stage
# gets what is left (minus a margin for the next), its own folder $OUT/<stage>, and is cut by SIGINT at
# its limit (every script here writes its results as it goes). A finished stage's folder is packed into
# $OUT/<stage>.tgz (the device tool brings back at most 8 files, 2 folders down).
#   carry: [".whl", ".carry"]   (.whl from ../shared/device/wheels.sh; .carry/datasets = ../shared/datasets)
#   usage: DEADLINE_S=560 bash benchmarks/device/run_stages.sh bench_judge adapters pool train eval validate
#   A group joined by '+' (train+adapters+validate) runs its stages at once, each with the group's budget:
#   only for stages whose claims are functional; timing stages (bench_judge, pool, eval) run alone.
# Stages: bench_judge (h200.sh bench_judge: issue 10), pool (pool_h200.sh: issue 14), eval
# (eval_references.sh: issue 16), train (train_stages.sh: issue 17), adapters (adapters_transcripts.sh:
# issue 18), validate (validate_tasks.sh: issue 19), tests / sandbox (h200.sh).
set -uo pipefail
START=$(date +%s)
ROOT_OUT="${OUT:-/tmp/out}"; mkdir -p "$ROOT_OUT"
DEADLINE_S="${DEADLINE_S:-560}"
HERE="$(cd "$(dirname "$0")" && pwd)"
left() { echo $(( DEADLINE_S - ($(date +%s) - START) )); }
run_stage() {  # stage budget
  local stage=$1 budget=$2 t
  mkdir -p "$ROOT_OUT/$stage"
  t=$(date +%s)
  echo "== $stage: start at $(( t - START )) s, budget $budget s" | tee -a "$ROOT_OUT/stages.txt"
  case "$stage" in
    bench_judge) OUT="$ROOT_OUT/$stage" BENCH_JUDGE_LIMIT_S=$(( budget - 30 )) \
                   timeout -s INT -k 15 "$budget" bash "$HERE/h200.sh" bench_judge ;;
    tests|sandbox|prewarm) OUT="$ROOT_OUT/$stage" TESTS_LIMIT_S=$(( budget - 30 )) SANDBOX_LIMIT_S=$(( budget - 30 )) \
                   PROBE_LIMIT_S=$(( budget - 30 )) PREWARM_LIMIT_S=$(( budget - 30 )) timeout -s INT -k 15 "$budget" bash "$HERE/h200.sh" "$stage" ;;
    pool)        OUT="$ROOT_OUT/$stage" BENCH_POOL_LIMIT_S=$(( budget - 30 )) \
                   timeout -s INT -k 15 "$budget" bash "$HERE/pool_h200.sh" ;;
    eval)        OUT="$ROOT_OUT/$stage" DEADLINE_S=$(( budget - 10 )) \
                   timeout -s INT -k 15 "$budget" bash "$HERE/eval_references.sh" ;;
    train)       OUT="$ROOT_OUT/$stage" TRAIN_DEADLINE_S=$(( budget - 20 )) \
                   timeout -s INT -k 15 "$budget" bash "$HERE/train_stages.sh" ;;
    adapters)    OUT="$ROOT_OUT/$stage" timeout -s INT -k 15 "$budget" bash "$HERE/adapters_transcripts.sh" ;;
    validate)    OUT="$ROOT_OUT/$stage" timeout -s INT -k 15 "$budget" bash "$HERE/validate_tasks.sh" ;;
    *) echo "unknown stage $stage" ;;
  esac > "$ROOT_OUT/$stage/stage.log" 2>&1
  echo "== $stage: rc $? after $(( $(date +%s) - t )) s" | tee -a "$ROOT_OUT/stages.txt"
  grep -v "^W1\|^ " "$ROOT_OUT/$stage/stage.log" | tail -25
  tar czf "$ROOT_OUT/$stage.tgz" -C "$ROOT_OUT" "$stage" && rm -rf "${ROOT_OUT:?}/$stage"
}
for group in "$@"; do
  budget=$(( $(left) - 10 ))
  if (( budget < 45 )); then echo "== $group: skipped, $(left) s left" | tee -a "$ROOT_OUT/stages.txt"; continue; fi
  IFS=+ read -ra members <<< "$group"
  if (( ${#members[@]} == 1 )); then run_stage "$group" "$budget"; continue; fi
  # each its own judge caches: baselines measured beside the other stages must not serve a later timing stage
  for stage in "${members[@]}"; do
    CUDA_GYM_CACHE_DIR="/tmp/cuda_gym_cache_$stage" run_stage "$stage" "$budget" > "$ROOT_OUT/$stage.summary.tmp" 2>&1 &
  done
  wait
  for stage in "${members[@]}"; do cat "$ROOT_OUT/$stage.summary.tmp"; rm -f "$ROOT_OUT/$stage.summary.tmp"; done
done
echo "total $(( $(date +%s) - START )) s" | tee -a "$ROOT_OUT/stages.txt"
