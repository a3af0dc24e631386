"""Device diagnosis (prewarm_diag.sh): Judge.prewarm_compile of one task alone, then of two with two helper
judges, each step's wall time printed as it ends."""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from adversarial.judging import load_task  # noqa: E402
from cuda_gym.judge import Judge, JudgeConfig  # noqa: E402

t = time.time()
with Judge(JudgeConfig(device="cuda:0")) as judge:
    for specs, jobs in ((["custom:scale_relu"], 1), (["kernelbench/L1/19_ReLU", "kernelbench/L1/23_Softmax"], 2)):
        s = time.time()
        print("compile", specs, jobs, judge.prewarm_compile([load_task(x) for x in specs], jobs=jobs),
              round(time.time() - s, 1), flush=True)
print("total", round(time.time() - t, 1), flush=True)
