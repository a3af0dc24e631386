"""Probe: why does one memory-bound kernel's median time differ between fresh processes?

The judge benchmark saw per-process medians of one solution differ by up to 8% (0.76 vs 0.82 ms) with a
small spread inside each process. Each mode times ``x * 1.75 + r`` (``add``) or its ReLU over 1 GiB
float32 tensors in several fresh processes and reports each process's median event time:

- ``buffers``: one fixed set of buffers (``fixed``); buffers re-allocated after ``empty_cache`` and
  warmed 250 ms (``realloc_warm``); re-allocated behind a random spacer before every call (``moved``).
- ``judge*``: the candidate worker's history (5 correctness trials with memory poisoning), then
  ``harness.run_timing`` (5 warm-up seeds, 250 ms, 50 timed). Variants, by words in the mode name:
  ``add`` (one kernel instead of two), ``empty_cache`` before timing, ``expandable`` (expandable
  allocator segments), ``nohistory`` (no correctness trials), ``fixed_inputs`` (one input set),
  ``reserve`` (an 8 GiB block cached first, poisoning without ``empty_cache``), ``late_arena`` (one
  block sized to a call's peak before timing).
- ``judge_add_diag``: the history, then 100 calls alternating two ways of timing, each read two ways:
  ``A``/``B`` = start event right after the host's synchronize, end event after a second device-wide
  synchronize (``A``) or recorded on the stream right after the call (``B``); ``C``/``D`` = the same
  with a 0.1 ms GPU spin queued before the start event; ``hA``/``hC`` are the host times.

Usage on the GPU machine: ``python3 benchmarks/device/placement_probe.py [processes] [mode ...]``
(``$BENCH_OUT`` names a JSON file for every process's figures).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

N = 128 * 256 * 8192  # the default size of builtin/scale_add_relu: 1 GiB of float32 per tensor

BUFFERS = r"""
import json, random, statistics, time, torch
n = %d
flush = torch.empty(128 * 2**20 // 4, dtype=torch.int32, device="cuda")
def timed(x, r, y):
    flush.fill_(1); torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); torch.add(r, x, alpha=1.75, out=y); e.record(); e.synchronize()
    return s.elapsed_time(e)
def warm(x, r, y, seconds=0.25):
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        timed(x, r, y)
x, r, y = (torch.randn(n, device="cuda") for _ in range(3))
warm(x, r, y)
fixed = [timed(x, r, y) for _ in range(30)]
del x, r, y
torch.cuda.empty_cache()
x, r, y = (torch.randn(n, device="cuda") for _ in range(3))
warm(x, r, y)
realloc = [timed(x, r, y) for _ in range(30)]
moved = []
for _ in range(30):
    del x, r, y
    torch.cuda.empty_cache()
    spacer = torch.empty(random.randint(1, 512) * 2**20, dtype=torch.uint8, device="cuda")
    x, r, y = (torch.randn(n, device="cuda") for _ in range(3))
    del spacer
    moved.append(timed(x, r, y))
print(json.dumps({"fixed": statistics.median(fixed), "realloc_warm": statistics.median(realloc),
                  "moved": statistics.median(moved)}))
""" % N

JUDGE = r"""
import json, os, statistics, sys, torch
from cuda_gym.judge import harness
n, mode = %d, sys.argv[1]
device = "cuda:0"
torch.cuda.set_device(device)
if "reserve" in mode:  # one large block first, kept in the cache: later buffers are carved from it
    block = torch.empty(8 * 2**30, dtype=torch.uint8, device=device)
    del block
def get_inputs():
    return [torch.randn(n), torch.randn(n)]
class Model(torch.nn.Module):
    def forward(self, x, r):
        y = torch.add(r, x, alpha=1.75)
        return y if "add" in mode else torch.relu(y)
model = Model().to(device).eval()
harness.warm_device(device)
poison = harness.MemoryPoison(device, 4 * n, False)
if "reserve" in mode:
    def arm():
        buf = torch.full((n // 2,), float("nan"), device=device)
        torch.cuda.synchronize(); del buf
    poison.arm = arm
with torch.no_grad():
    for seed in range(0 if "nohistory" in mode else 5):
        inputs = harness.make_inputs(get_inputs, 1000 + seed, device)
        clones = [x.clone() for x in inputs]
        poison.arm()
        out = model(*inputs)
        harness.synchronize(device)
        kept = harness.sample_large(out, 7, 256 * 2**20)
        kept = kept.cpu() if isinstance(kept, torch.Tensor) else kept
        del out, inputs, clones, kept
if "empty_cache" in mode:
    harness.synchronize(device)
    torch.cuda.empty_cache()
if "late_arena" in mode:  # one iteration's peak, then one block of that size holds every timing buffer
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    with torch.no_grad():
        inputs = harness.make_inputs(get_inputs, 1, device)
        out = model(*inputs)
    need = torch.cuda.max_memory_allocated() - base
    del inputs, out
    harness.synchronize(device)
    torch.cuda.empty_cache()
    block = torch.empty(need + 2**28, dtype=torch.uint8, device=device)
    del block
if "fixed_inputs" in mode:
    fixed = harness.make_inputs(get_inputs, 99, device)
    get_inputs = lambda: fixed
if "diag" in mode:  # where does a slow process spend its time: launch latency, the host round trip, the GPU?
    import time
    flusher = harness.L2Flusher(device)
    rows = {"A": [], "B": [], "C": [], "D": [], "hA": [], "hC": []}
    with torch.no_grad():
        for i in range(5):
            model(*harness.make_inputs(get_inputs, i, device))
        t_end = time.perf_counter() + 0.25
        inputs = harness.make_inputs(get_inputs, 5, device)
        while time.perf_counter() < t_end:
            model(*inputs); torch.cuda.synchronize()
        del inputs
        for i in range(100):
            inputs = harness.make_inputs(get_inputs, 100 + i, device)
            flusher(); torch.cuda.synchronize()
            s, k, e = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            pre = i %% 2 == 1
            if pre:
                torch.cuda._sleep(200_000)  # the GPU is busy while the host queues the call
            t0 = time.perf_counter()
            s.record(); out = model(*inputs); k.record(); torch.cuda.synchronize(); e.record(); e.synchronize()
            h = (time.perf_counter() - t0) * 1000
            a, b = s.elapsed_time(e), s.elapsed_time(k)
            rows["C" if pre else "A"].append(a); rows["D" if pre else "B"].append(b); rows["hC" if pre else "hA"].append(h)
            del out, inputs
    print(json.dumps({key: statistics.median(v) for key, v in rows.items()} | {"median": statistics.median(rows["A"])}))
    sys.exit(0)
ptrs = []
def keep(i, out):
    ptrs.append(out.data_ptr())
times = harness.run_timing(model, get_inputs, device, list(range(5)), list(range(100, 150)), keep, [0, 49],
                           warmup_s=0.25)
stats = harness.summarize(times)
print(json.dumps({"median": stats["median_ms"], "iqr": stats["iqr_ms"], "out_ptr_mod_1g": [p %% 2**30 for p in ptrs],
                  "segments": torch.cuda.memory_stats().get("segment.all.current", 0)}))
""" % N

MODES = ("buffers", "judge", "judge_empty_cache", "judge_expandable", "judge_nohistory", "judge_fixed_inputs",
         "judge_reserve", "judge_add", "judge_add_reserve", "judge_add_late_arena", "judge_late_arena", "judge_add_diag")


def child(mode: str) -> dict:
    """One fresh process of ``mode``; its JSON line."""
    env = dict(os.environ)
    if mode == "buffers":
        cmd = [sys.executable, "-c", BUFFERS]
    else:
        cmd = [sys.executable, "-c", JUDGE, "judge" if mode == "judge_expandable" else mode]
        if mode == "judge_expandable":
            env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    # cwd outside the checkout: there ``cuda_gym`` resolves through the editable install (envs/ is mapped)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, cwd="/")
    if out.returncode != 0:
        return {"error": out.stderr[-2000:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(processes: int, modes: list[str]) -> dict:
    """Run every mode in ``processes`` fresh processes (interleaved); max/min of each measure."""
    rows: dict[str, list[dict]] = {m: [] for m in modes}
    for _ in range(processes):
        for mode in modes:
            rows[mode].append(child(mode))
    summary: dict[str, dict] = {}
    for mode, rs in rows.items():
        ok = [r for r in rs if "error" not in r]
        keys = [k for k in ("fixed", "realloc_warm", "moved", "median", "A", "B", "C", "D", "hA", "hC") if ok and k in ok[0]]
        summary[mode] = {"processes": rs}
        for k in keys:
            v = [r[k] for r in ok]
            summary[mode][k] = {"max_min": max(v) / min(v), "median": statistics.median(v), "min": min(v), "max": max(v)}
    return summary


if __name__ == "__main__":
    n_proc = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    chosen = sys.argv[2:] or list(MODES)
    result = main(n_proc, chosen)
    text = json.dumps(result, indent=2)
    if os.environ.get("BENCH_OUT"):
        with open(os.environ["BENCH_OUT"], "w") as f:
            f.write(text)
    for mode, s in result.items():
        print(mode, {k: (round(v["max_min"], 4), round(v["median"], 4)) for k, v in s.items() if k != "processes"})
