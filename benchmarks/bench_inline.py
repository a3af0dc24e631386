"""Single-file judgement build time: torch's ``load_inline`` against the content-cached build and shim.

Run with ``python3 benchmarks/bench_inline.py`` (CPU: a small ``load_inline`` CPU extension). Each
"judgement" is what the judge pays before the candidate can call the model:

- ``torch_private_dir``: the candidate imports the file with a fresh private ``TORCH_EXTENSIONS_DIR``
  (the minimum fix for the shared folder): ``load_inline`` compiles everything every time.
- ``torch_shared_dir``: the same folder every time (the old, poisonable setup): torch's own cache.
- ``cached_first``: ``inline.prepare`` (record + build) on new sources, then the import with the shim.
- ``cached_repeat``: the same file judged again: record + cache hit + import with the shim.

Writes medians (seconds) to ``$BENCH_OUT`` or ``benchmarks/results/bench_inline.json``.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from cuda_gym.build import BuildConfig  # noqa: E402
from cuda_gym.build.inline import prepare  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "bench_inline.json"

SOURCE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = """
// {marker}
torch::Tensor scale_add(torch::Tensor a, torch::Tensor b) {{
    auto out = torch::empty_like(a);
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* po = out.data_ptr<float>();
    for (int64_t i = 0; i < a.numel(); ++i) po[i] = pa[i] + 2.0f * pb[i];
    return out;
}}
"""
ext = load_inline(name="bench_scale_add", cpp_sources=cpp_src, functions=["scale_add"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.scale_add(a, b)
'''

IMPORT = """
import importlib.util, sys
if len(sys.argv) > 2:
    from cuda_gym.build.inline import install_prebuilt
    install_prebuilt(sys.argv[2])
spec = importlib.util.spec_from_file_location("model_new", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
import torch
assert torch.equal(module.ModelNew()(torch.ones(4), torch.ones(4)), torch.full((4,), 3.0))
"""


def _import(source: Path, ext_dir: Path, manifest: Path | None = None) -> float:
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(ext_dir)}
    started = time.perf_counter()
    cmd = [sys.executable, "-c", IMPORT, str(source), *([str(manifest)] if manifest else [])]
    subprocess.run(cmd, check=True, env=env, capture_output=True, timeout=900)
    return time.perf_counter() - started


def _write(folder: Path, marker: str) -> Path:
    path = folder / f"model_new_{marker}.py"
    path.write_text(SOURCE.format(marker=marker))
    return path


def main() -> None:
    """Measure each way (few rounds: two compile-bound ways cost a full torch compile each)."""
    times: dict[str, list[float]] = {k: [] for k in ("torch_private_dir", "torch_shared_dir", "cached_first",
                                                     "cached_repeat")}
    with tempfile.TemporaryDirectory(prefix="bench_inline_") as tmp:
        folder = Path(tmp)
        config = BuildConfig(cache_dir=folder / "cache", timeout_s=900)
        warm = _write(folder, "warm")  # the PCH and binding.o once, as on any machine after its first build
        assert prepare(warm, folder, "cpu", config).ok
        shared = folder / "shared_ext"
        fixed = _write(folder, "fixed")
        _import(fixed, shared)  # fill torch's shared folder once
        for _ in range(2):
            times["torch_private_dir"].append(_import(fixed, Path(tempfile.mkdtemp(dir=folder))))
        for _ in range(3):
            times["torch_shared_dir"].append(_import(fixed, shared))
        for _ in range(2):
            fresh = _write(folder, uuid.uuid4().hex)
            started = time.perf_counter()
            prepared = prepare(fresh, folder, "cpu", config)
            assert prepared.ok, prepared.log
            times["cached_first"].append(time.perf_counter() - started + _import(fresh, folder / "unused",
                                                                                 prepared.manifest))
        assert prepare(fixed, folder, "cpu", config).ok  # the first judgement of this file (not timed)
        for _ in range(3):
            started = time.perf_counter()
            prepared = prepare(fixed, folder, "cpu", config)
            assert prepared.ok and all(r.cached for r in prepared.results)
            times["cached_repeat"].append(time.perf_counter() - started + _import(fixed, folder / "unused",
                                                                                  prepared.manifest))
    medians = {k: statistics.median(v) for k, v in times.items()}
    summary = {
        "medians_s": medians,
        "rounds": {k: len(v) for k, v in times.items()},
        "speedup_repeat_vs_private_dir": medians["torch_private_dir"] / medians["cached_repeat"],
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    out = Path(os.environ.get("BENCH_OUT") or RESULTS)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
