#!/usr/bin/env bash
# Diagnosis on the device (2026-12-05): the compile prewarm made no progress in 470 s. This runs
# Judge.prewarm_compile for three tasks, one at a time, with the workers' debug log, for 110 s, and lists
# every thread's CPU and state twice (dump_stacks.sh). carry: [".whl", ".carry"]
export CUDA_GYM_SANDBOX=unshare
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
source benchmarks/device/setup.sh > "$OUT/setup.log" 2>&1
bash benchmarks/device/dump_stacks.sh 50 45 "$OUT/ps.txt" &
CUDA_GYM_WORKER_LOG_LEVEL=DEBUG timeout -s INT -k 5 110 python3 - > "$OUT/compile.log" 2>&1 <<'PY'
import sys, time
sys.path.insert(0, "tests")
from adversarial.judging import load_task
from cuda_gym.judge import Judge, JudgeConfig
specs = ["custom:scale_relu", "kernelbench/L1/19_ReLU", "kernelbench/L1/23_Softmax"]
tasks = []
for s in specs:
    try:
        tasks.append(load_task(s))
    except BaseException as e:
        print("skip", s, e, flush=True)
t = time.time()
with Judge(JudgeConfig(device="cuda:0")) as judge:
    for task in tasks:
        s = time.time()
        print("compile", task.id, judge.prewarm_compile([task], jobs=1), round(time.time() - s, 1), flush=True)
print("total", round(time.time() - t, 1), flush=True)
PY
echo "rc $?" >> "$OUT/compile.log"
grep -v "^W1" "$OUT/compile.log" | grep -i "compile \|total\|rc \|error\|Traceback" | tail -20
