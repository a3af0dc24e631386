"""Single-file submissions (cuda_gym.build.inline): recorded load_inline calls, content-cached builds, the shim."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cuda_gym.build import BuildConfig
from cuda_gym.build.inline import InlineCall, install_prebuilt, prepare, record_calls

SINGLE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = """
torch::Tensor scale_add(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* po = out.data_ptr<float>();
    for (int64_t i = 0; i < a.numel(); ++i) po[i] = %s;
    return out;
}
"""
ext = load_inline(name="scale_add_ext", cpp_sources=cpp_src, functions=["scale_add"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.scale_add(a, b)
'''
HONEST = "pa[i] + 2.0f * pb[i]"

RUN_WITH_SHIM = """
import importlib.util, json, sys, torch
from cuda_gym.build.inline import install_prebuilt
install_prebuilt(sys.argv[2])
spec = importlib.util.spec_from_file_location("model_new", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
a, b = torch.arange(4.0), torch.ones(4)
print(json.dumps(mod.ModelNew()(a, b).tolist()))
"""


def single_file(tmp_path: Path, body: str = HONEST, name: str = "model_new.py") -> Path:
    path = tmp_path / name
    path.write_text(SINGLE % body)
    return path


def test_calls_are_recorded_as_load_inline_would_see_them(tmp_path: Path) -> None:
    recording = record_calls(single_file(tmp_path))
    assert recording.error is None, recording.output
    [call] = recording.calls
    assert call.name == "scale_add_ext" and call.functions == (("scale_add", "scale_add"),)
    assert HONEST in call.cpp_sources[0]
    assert InlineCall.from_json(json.loads(json.dumps(call.to_json()))) == call
    with pytest.raises(Exception, match="keys"):
        InlineCall.from_json({**call.to_json(), "surprise": 1})


def test_a_file_failing_at_import_reports_why(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nraise ValueError('no kernels today')\n")
    recording = record_calls(bad)
    assert recording.calls == [] and "no kernels today" in (recording.error or "")


FORGED_RECORDING = """
import atexit, os, sys
out = sys.argv[3] if len(sys.argv) == 4 and sys.argv[1] == "record" else None

def forge():
    os.unlink(out)
    {how}

if out:
    atexit.register(forge)
"""
"""An import that replaces the recorder's ``calls.json`` as its process exits (the agent's file runs there)."""


@pytest.mark.parametrize("how", [
    "os.symlink('/etc/hostname', out)",  # a link to a host file: never followed
    "import json; open(out, 'w').write(json.dumps({'calls': [{'name': 1}], 'error': None}))",  # a wrong-shaped call
    "open(out, 'w').write('[' * 100000)",  # JSON nested past any recursion limit
    "open(out, 'w').write('not json')",
    "os.mkfifo(out)",  # a FIFO: never opened for reading (it would block)
], ids=["link", "wrong-shape", "deep", "not-json", "fifo"])
def test_a_forged_recording_is_the_files_failure_not_an_exception(tmp_path: Path, how: str) -> None:
    path = single_file(tmp_path)
    path.write_text(path.read_text() + FORGED_RECORDING.replace("{how}", how))
    recording = record_calls(path)
    assert recording.calls == [] and "recording is unreadable" in (recording.error or ""), recording


def test_prepared_modules_serve_the_candidate_and_repeat_judgements_hit_the_cache(
        build_config: BuildConfig, tmp_path: Path) -> None:
    """The shim returns the prebuilt module; a planted torch-extensions folder is never read."""
    source = single_file(tmp_path)
    first = prepare(source, tmp_path, "cpu", build_config)
    assert first.ok, first.log
    again = prepare(source, tmp_path, "cpu", build_config)
    assert again.ok and all(r.cached for r in again.results)
    assert again.recording.output == ""  # the recording came from the cache: no sandboxed run this time
    assert again.results[0].key == first.results[0].key

    planted = tmp_path / "torch_extensions"
    (planted / "scale_add_ext").mkdir(parents=True)
    (planted / "scale_add_ext" / "scale_add_ext.so").write_bytes(b"planted")
    env = {"TORCH_EXTENSIONS_DIR": str(planted), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", RUN_WITH_SHIM, str(source), str(again.manifest)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == [2.0, 3.0, 4.0, 5.0]
    assert sorted(p.name for p in planted.rglob("*")) == ["scale_add_ext", "scale_add_ext.so"]


def test_the_shim_refuses_calls_it_did_not_prebuild(tmp_path: Path) -> None:
    from cuda_gym.errors import BuildError

    install_prebuilt({})
    import torch.utils.cpp_extension as cpp_ext

    try:
        with pytest.raises(BuildError, match="not prebuilt"):
            cpp_ext.load_inline(name="x", cpp_sources="int f() { return 1; }", functions=["f"])
        with pytest.raises(BuildError, match="load_inline"):
            cpp_ext.load(name="x", sources=["x.cpp"])
    finally:
        import importlib

        importlib.reload(cpp_ext)


def test_a_linked_single_file_is_a_failed_build_not_an_exception(build_config: BuildConfig, tmp_path: Path) -> None:
    link = tmp_path / "model_new.py"
    link.symlink_to("/proc/kmsg")
    result = prepare(link, tmp_path, "cpu", build_config)
    assert not result.ok and "plain Python file" in result.log


def test_a_compile_error_is_the_agents_failed_build(build_config: BuildConfig, tmp_path: Path) -> None:
    result = prepare(single_file(tmp_path, "pa[i] + undefined_name"), tmp_path, "cpu", build_config)
    assert not result.ok and result.manifest is None
    assert "undefined_name" in result.log and "cpp_sources:" in result.log, result.log


def test_cuda_sources_on_the_cpu_device_are_refused(build_config: BuildConfig, tmp_path: Path) -> None:
    path = tmp_path / "cuda.py"
    path.write_text(textwrap.dedent('''
        from torch.utils.cpp_extension import load_inline
        ext = load_inline(name="k", cpp_sources="void f();", cuda_sources="__global__ void k() {}", functions=["f"])
    '''))
    result = prepare(path, tmp_path, "cpu", build_config)
    assert not result.ok and "cpu device" in result.log


PLANT = """
import os, sys, time
from pathlib import Path
from torch.utils.cpp_extension import load_inline
sys.path.insert(0, sys.argv[2])
from test_build_inline import SINGLE
import re
src = re.search(r'cpp_src = \\"\\"\\"(.*?)\\"\\"\\"', SINGLE % "0.0f * pa[i]", re.S).group(1)
honest = re.search(r'cpp_src = \\"\\"\\"(.*?)\\"\\"\\"', SINGLE % sys.argv[3], re.S).group(1)
folder = Path(os.environ["TORCH_EXTENSIONS_DIR"]) / "scale_add_ext"
load_inline(name="scale_add_ext", cpp_sources=src, functions=["scale_add"])  # the cheat, built by torch
main = folder / "main.cpp"
# what load_inline writes for the honest sources, dated before the cheat's objects
text = main.read_text().replace(src, honest)
main.write_text(text)
old = time.time() - 86400
os.utime(main, (old, old))
"""


def _run(cmd: list[str], env: dict[str, str]) -> list[float]:
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.slow
def test_a_planted_extensions_folder_poisons_torch_but_not_the_shim(build_config: BuildConfig,
                                                                    tmp_path: Path) -> None:
    """An earlier evaluation plants its cheat in the shared torch-extensions folder, restores the honest
    main.cpp with an old timestamp: torch's load_inline (ninja on timestamps) then loads the cheat for
    the next, honest file. The judge's own path (prepare + shim) never reads that folder."""
    import os

    source = single_file(tmp_path)
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path / "shared_ext")}
    plant = subprocess.run([sys.executable, "-c", PLANT, str(source), str(Path(__file__).parent), HONEST], env=env,
                           capture_output=True, text=True, timeout=600)
    assert plant.returncode == 0, plant.stderr[-3000:]
    via_torch = "import importlib.util, json, sys, torch\n" + RUN_WITH_SHIM.split("install_prebuilt(sys.argv[2])\n")[1]
    assert _run([sys.executable, "-c", via_torch, str(source)], env) == [0.0, 0.0, 0.0, 0.0]  # the cheat
    prepared = prepare(source, tmp_path, "cpu", build_config)
    assert prepared.ok, prepared.log
    assert _run([sys.executable, "-c", RUN_WITH_SHIM, str(source), str(prepared.manifest)], env) == [2.0, 3.0, 4.0, 5.0]


# -- red team B1: many load_inline calls ------------------------------------------------------------

MANY = '''
from torch.utils.cpp_extension import load_inline
CPP = "torch::Tensor f(torch::Tensor x) { return torch::empty_like(x); }\\n"
mods = [load_inline(name=f"ext{i}", cpp_sources=CPP + f"// variant {i}\\n", functions=["f"]) for i in range(%d)]
'''


def test_more_load_inline_calls_than_the_cap_are_a_compile_failure_without_building(build_config: BuildConfig,
                                                                                     tmp_path: Path) -> None:
    """B1: twelve calls differing by a comment were built one after another (406 s for one verdict)."""
    import time

    path = tmp_path / "many.py"
    path.write_text(MANY % 8)
    started = time.monotonic()
    result = prepare(path, tmp_path, "cpu", build_config)
    assert not result.ok and result.manifest is None and result.results == []
    assert "8 different load_inline calls" in result.log and "at most 4" in result.log
    assert len(result.recording.calls) == 8 and time.monotonic() - started < 60


def test_all_builds_of_a_file_share_one_deadline(build_config: BuildConfig, tmp_path: Path) -> None:
    import time
    from dataclasses import replace

    from cuda_gym.build.inline import BuildBudget

    budget = BuildBudget(BuildConfig(timeout_s=3.0))
    first = budget.next_config()
    assert first is not None and first.timeout_s <= 3.0
    time.sleep(1.2)
    second = budget.next_config()
    assert second is not None and second.timeout_s <= 1.8  # what the first build left, not 3 s again
    time.sleep(1.0)
    assert budget.next_config() is None and "3 s together" in budget.exhausted_message(1, 2)
    # through prepare: two distinct uncached calls, 3 s for both builds together
    path = tmp_path / "two.py"
    path.write_text((MANY % 2).replace("variant", f"variant {time.time_ns()}"))
    result = prepare(path, tmp_path, "cpu", replace(build_config, timeout_s=3.0))
    assert not result.ok and "ran past 3 s together" in result.log, result.log
    assert "build stopped: it ran past" in result.log and len(result.results) == 1  # the first ninja run was cut
