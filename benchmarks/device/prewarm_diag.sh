#!/usr/bin/env bash
# Diagnosis on the device (2026-12-05, session 18): why Judge.prewarm_compile makes no progress. Runs
# prewarm_probe.py twice on a fresh machine, unpinned (CUDA_GYM_PIN_CPUS=0) and pinned, each for at most
# LIMIT seconds, with the workers' DEBUG log (every driver call), thread listings and py-spy dumps of every
# reference worker and candidate server at two moments; left-over judge processes are killed between runs.
# carry: [".whl", ".carry"] (.carry/tools holds the py-spy wheel)
export CUDA_GYM_SANDBOX=unshare
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
LIMIT="${LIMIT:-100}"
source benchmarks/device/setup.sh > "$OUT/setup.log" 2>&1
python3 -m pip install -q --no-index --no-deps --target /tmp/pyspy .carry/tools/py_spy-*.whl >> "$OUT/setup.log" 2>&1
SPY=/tmp/pyspy/bin/py-spy
lscpu > "$OUT/lscpu.txt"; nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
snapshot() {  # $1 file
  { echo "=== $(date -u +%T)"; ps -eLo pid,tid,psr,stat,pcpu,wchan:24,comm --sort=-pcpu | grep -v " ps$" | head -30
    for pid in $(pgrep -f "cuda_gym.judge.(reference_worker|candidate_server)"); do
      echo "--- py-spy $pid: $(tr '\0' ' ' < /proc/$pid/cmdline | cut -c1-120)"; grep Cpus_allowed_list /proc/$pid/status
      timeout 20 "$SPY" dump --pid "$pid" 2>&1 | head -80
    done; } >> "$1" 2>&1
}
run() {  # $1 tag, $2 pin
  local tag=$1 start=$(date +%s)
  rm -rf /tmp/cuda_gym_cache/judge/logs
  CUDA_GYM_PIN_CPUS=$2 CUDA_GYM_WORKER_LOG_LEVEL=DEBUG timeout -s INT -k 5 "$LIMIT" \
    python3 benchmarks/device/prewarm_probe.py > "$OUT/$tag.log" 2>&1 &
  local job=$!
  (sleep 30; snapshot "$OUT/${tag}_stacks.txt"; sleep 30; snapshot "$OUT/${tag}_stacks.txt") &
  local spy=$!
  wait $job; echo "rc $? after $(( $(date +%s) - start )) s" >> "$OUT/$tag.log"
  kill $spy 2>/dev/null; wait $spy 2>/dev/null
  pkill -9 -f "cuda_gym.judge" ; sleep 1
  for f in /tmp/cuda_gym_cache/judge/logs/*.log; do cp "$f" "$OUT/${tag}_$(basename "$f")"; done
  grep -v "^W1" "$OUT/$tag.log" | tail -8
}
run nopin 0
run pin 1
