"""Build: real compiles of CUDA and CPU workspaces, incremental rebuilds, the artifact cache and logs."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import stat
import time
import uuid
from pathlib import Path

import pytest

from build_fixtures import BuiltWorkspace, add_task, write_add_kernels
from cuda_gym.build import BuildConfig, build_workspace, cache_root, find_cuda_home, load_extension, summarize_log
from cuda_gym.build.toolchain import _fast_linker, _parse_arch
from cuda_gym.errors import BuildError
from cuda_gym.workspace import Workspace


def copy_built(built: BuiltWorkspace, dest: Path) -> Workspace:
    """A copy of a built episode's workspace that a test may change freely (its objects stay cached)."""
    ws = built.ws
    shutil.copytree(ws.episode_dir, dest, symlinks=True)
    return Workspace(dest, dest / "workspace", dest / "build", ws.task, ws.flavour, dict(ws.infra_hashes))


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


# -- toolchain discovery -------------------------------------------------------------------------


def _fake_toolkit(tmp_path: Path) -> Path:
    home = tmp_path / "cuda-99.9"
    (home / "bin").mkdir(parents=True)
    (home / "include").mkdir(parents=True, exist_ok=True)
    (home / "include" / "cuda_runtime.h").write_text("/* fake */\n")
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 99.9'\n")
    nvcc.chmod(0o755)
    return home


def test_find_cuda_home_prefers_a_valid_cuda_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _fake_toolkit(tmp_path)
    monkeypatch.setenv("CUDA_HOME", str(home))
    assert find_cuda_home() == home.resolve()


def test_find_cuda_home_follows_a_wrapper_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _fake_toolkit(tmp_path)
    bindir = tmp_path / "wrappers"
    bindir.mkdir()
    wrapper = bindir / "nvcc"
    wrapper.write_text(f'#!/bin/sh\nexec {home}/bin/nvcc "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "not-a-toolkit"))  # invalid: ignored
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    assert find_cuda_home() == home.resolve()


def test_find_cuda_home_finds_the_real_toolkit_here(monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists():
        pytest.skip("no CUDA toolkit on this machine")
    # Without CUDA_HOME, a wrapper script such as /usr/local/bin/nvcc must not pass for a toolkit.
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    home = find_cuda_home()
    assert home is not None and (home / "bin" / "nvcc").is_file()
    assert (home / "include" / "cuda_runtime.h").is_file()


def test_a_wrapper_folder_without_headers_is_not_a_toolkit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "local"
    (fake / "bin").mkdir(parents=True)
    (fake / "bin" / "nvcc").write_text("#!/bin/sh\nexec /nonexistent/bin/nvcc \"$@\"\n")
    monkeypatch.setenv("CUDA_HOME", str(fake))
    assert find_cuda_home() != fake.resolve()


def test_arch_list_becomes_gencode_flags() -> None:
    assert _parse_arch("9.0") == ["-gencode=arch=compute_90,code=sm_90"]
    assert _parse_arch("8.0;9.0+PTX") == ["-gencode=arch=compute_80,code=sm_80",
                                          "-gencode=arch=compute_90,code=[sm_90,compute_90]"]
    assert _parse_arch("sm_90a") == ["-gencode=arch=compute_90a,code=sm_90a"]
    with pytest.raises(BuildError, match="unknown CUDA arch"):
        _parse_arch("hopper")


@pytest.mark.skipif(shutil.which("ld.gold") is None, reason="needs ld.gold")
def test_gold_is_used_only_where_it_links(tmp_path: Path) -> None:
    """A dangling libstdc++.so on the search path (the H200 image's compiler has one) breaks gold,
    not bfd: the probe then falls back to the default linker instead of failing every build."""
    cxx = shutil.which("c++") or "g++"
    assert _fast_linker(cxx, []) == ["-fuse-ld=gold"]
    (tmp_path / "libstdc++.so").symlink_to(tmp_path / "missing" / "libstdc++.so.6")
    assert _fast_linker(cxx, [f"-L{tmp_path}"]) == []


def test_cache_root_honours_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_GYM_BUILD_CACHE", str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c"
    assert cache_root(BuildConfig(cache_dir=tmp_path / "d")) == tmp_path / "d"


# -- logs ----------------------------------------------------------------------------------------


def test_summarize_log_puts_errors_first_and_drops_noise(tmp_path: Path) -> None:
    root = tmp_path / "workspace"
    raw = "\n".join([
        "[1/3] NVCC kernels/a.cu",
        f"{root}/kernels/b.cpp:3:5: warning: unused variable 'x' [-Wunused-variable]",
        "    3 |   int x;",
        "FAILED: ../build/obj/kernels/a.cu.o",
        "/usr/local/cuda/bin/nvcc " + "-isystem /very/long/include " * 20
        + "-c kernels/a.cu -o ../build/obj/kernels/a.cu.o",
        "kernels/a.cu(12): error: identifier \"y\" is undefined",
        "      out[i] = y;",
        "ninja: build stopped: subcommand failed.",
    ])
    log = summarize_log(raw, root)
    lines = log.splitlines()
    assert lines[0] == 'kernels/a.cu:12: error: identifier "y" is undefined'
    assert "kernels/b.cpp:3:5: warning: unused variable 'x' [-Wunused-variable]" in lines
    assert lines.index('kernels/a.cu:12: error: identifier "y" is undefined') < \
        lines.index("kernels/b.cpp:3:5: warning: unused variable 'x' [-Wunused-variable]")
    assert "ninja" not in log and "[1/3]" not in log and "-isystem" not in log and str(root) not in log


# -- real builds ---------------------------------------------------------------------------------


def test_cuda_workspace_compiles_and_imports(cuda_add_build: BuiltWorkspace) -> None:
    result = cuda_add_build.result
    assert result.ok and result.module_path is not None and result.module_path.is_file()
    assert result.module_path.is_relative_to(cuda_add_build.config.cache_dir)
    module = load_extension(result.module_path)
    assert module.__name__ == "cuda_extension"
    assert "out = a + b" in module.add_forward.__doc__
    assert len(result.key) == 64


@pytest.mark.gpu
def test_cuda_kernel_computes_the_sum(cuda_add_build: BuiltWorkspace) -> None:
    import torch

    module = load_extension(cuda_add_build.result.module_path)
    a, b = torch.randn(4099, device="cuda"), torch.randn(4099, device="cuda")
    assert torch.allclose(module.add_forward(a, b), a + b)


def test_cpu_workspace_compiles_loads_and_computes(cpu_add_build: BuiltWorkspace) -> None:
    import torch

    module = load_extension(cpu_add_build.result.module_path)
    a, b = torch.randn(10_001), torch.randn(10_001)
    assert torch.allclose(module.add_forward(a, b), a + b)


def test_identical_contents_hit_the_cache(cuda_add_build: BuiltWorkspace, tmp_path: Path) -> None:
    ws = Workspace.create(add_task(), flavour="cuda", parent=tmp_path)
    write_add_kernels(ws)
    result = build_workspace(ws, cuda_add_build.config)
    assert result.cached and result.ok and result.compiled == ()
    assert result.key == cuda_add_build.result.key
    assert result.module_path == cuda_add_build.result.module_path
    assert result.seconds < 1.0
    assert result.inputs == ("kernels/add.cu", "kernels/add_binding.cpp", "binding_registry.h") or \
        set(result.inputs) == {"kernels/add.cu", "kernels/add_binding.cpp", "binding_registry.h"}


def test_one_line_edit_recompiles_only_that_file(cuda_add_build: BuiltWorkspace, tmp_path: Path) -> None:
    ws = copy_built(cuda_add_build, tmp_path / "ep")
    edit(ws.root / "kernels" / "add.cu", "out[i] = a[i] + b[i];", "out[i] = b[i] + a[i];")
    result = build_workspace(ws, cuda_add_build.config)
    assert result.ok and not result.cached, result.log
    assert result.compiled == ("kernels/add.cu",)
    assert "NVCC kernels/add.cu" in result.raw_log
    assert "add_binding.cpp" not in result.raw_log
    assert result.key != cuda_add_build.result.key
    assert result.seconds < 120


def test_broken_cuda_file_reports_file_and_line(cuda_add_build: BuiltWorkspace, tmp_path: Path) -> None:
    ws = copy_built(cuda_add_build, tmp_path / "ep")
    edit(ws.root / "kernels" / "add.cu", "long blocks = (n + 255) / 256;", "long blocks = undefined_thing;")
    result = build_workspace(ws, cuda_add_build.config)
    assert not result.ok and result.module_path is None
    first = result.log.splitlines()[0]
    assert first.startswith("kernels/add.cu:9: error:") and "undefined_thing" in first, result.log
    assert "add_binding" not in result.log
    assert not (cuda_add_build.config.cache_dir / result.key).exists()


def test_broken_cpp_kernel_reports_file_line_and_column(cpu_add_build: BuiltWorkspace, tmp_path: Path) -> None:
    ws = copy_built(cpu_add_build, tmp_path / "ep")
    edit(ws.root / "kernels" / "add.cpp", "out[i] = a[i] + b[i];", "out[i] = a[i] + c[i];")
    result = build_workspace(ws, cpu_add_build.config)
    assert not result.ok
    first_error = next(line for line in result.log.splitlines() if "error" in line)
    assert first_error.startswith("kernels/add.cpp:5:51: error:") and "'c'" in first_error, result.log
    assert "-march=native" not in result.log  # the command line is noise for the agent
    assert "\u2018" not in result.raw_log  # LC_ALL=C: plain quotes


def test_cuda_file_in_a_cpu_workspace_is_a_failed_build(cpu_add_build: BuiltWorkspace, tmp_path: Path) -> None:
    ws = Workspace.create(add_task(), flavour="cpu", parent=tmp_path)
    (ws.root / "kernels" / "k.cu").write_text("__global__ void k() {}\n")
    result = build_workspace(ws, cpu_add_build.config)
    assert not result.ok and "CPU workspace" in result.log


def test_sandboxed_rebuild(cpu_add_build: BuiltWorkspace, tmp_path: Path) -> None:
    import torch

    from cuda_gym.sandbox import Sandbox

    ws = copy_built(cpu_add_build, tmp_path / "ep")
    edit(ws.root / "kernels" / "add.cpp", "out[i] = a[i] + b[i];", "out[i] = a[i] + 2.0f * b[i];")
    result = build_workspace(ws, cpu_add_build.config, sandbox=Sandbox(writable=[ws.root]))
    assert result.ok, result.log
    assert "CXX kernels/add.cpp" in result.raw_log and "add_binding" not in result.raw_log
    a, b = torch.randn(100), torch.randn(100)
    assert torch.allclose(load_extension(result.module_path).add_forward(a, b), a + 2 * b)


def _build_in_process(args: tuple[str, str, str]) -> tuple[bool, bool, str]:
    parent, cache, marker = args
    ws = Workspace.create(add_task(), flavour="cpu", parent=parent)
    write_add_kernels(ws)
    kernel = ws.root / "kernels" / "add.cpp"
    kernel.write_text(f"// {marker}\n" + kernel.read_text())
    result = build_workspace(ws, BuildConfig(cache_dir=Path(cache), timeout_s=900))
    return result.ok, result.cached, result.key


def test_concurrent_builders_compile_once(cpu_add_build: BuiltWorkspace, tmp_path: Path) -> None:
    marker = uuid.uuid4().hex  # contents no earlier test built
    ctx = multiprocessing.get_context("spawn")
    jobs = [(str(tmp_path), str(cpu_add_build.config.cache_dir), marker)] * 3
    with ctx.Pool(3) as pool:
        results = pool.map(_build_in_process, jobs)
    assert all(ok for ok, _, _ in results), results
    assert len({key for _, _, key in results}) == 1
    assert sum(1 for _, cached, _ in results if not cached) == 1
    entry = cpu_add_build.config.cache_dir / results[0][2]
    assert [p.name for p in entry.iterdir()] == ["cuda_extension.so"]  # no temporary left behind
    assert entry.joinpath("cuda_extension.so").stat().st_mode & stat.S_IXUSR


def test_two_extensions_in_one_process_stay_separate(cuda_add_build: BuiltWorkspace,
                                                     cpu_add_build: BuiltWorkspace) -> None:
    import torch

    cuda_mod = load_extension(cuda_add_build.result.module_path)
    cpu_mod = load_extension(cpu_add_build.result.module_path)
    a, b = torch.randn(8), torch.randn(8)
    assert torch.allclose(cpu_mod.add_forward(a, b), a + b)
    with pytest.raises(RuntimeError, match="expected CUDA tensors"):
        cuda_mod.add_forward(a, b)


# -- what the shared cache trusts ----------------------------------------------------------------

CHEAT = "out[i] = 0.0f * (a[i] + b[i]);"


def test_restored_sources_with_old_timestamps_never_get_the_cheat_binary(cpu_add_build: BuiltWorkspace,
                                                                         tmp_path: Path) -> None:
    """The poisoning attack: build a cheat, restore the honest sources with `touch -d` old times.

    ninja trusted the timestamps, kept the cheat's object and the cheat was stored under the honest
    sources' key, where every other episode found it. Rebuild decisions are content hashes now.
    """
    import torch

    config = cpu_add_build.config
    marker = f"// {uuid.uuid4().hex}\n"  # contents no earlier build stored
    ws = Workspace.create(add_task(), flavour="cpu", parent=tmp_path)
    write_add_kernels(ws)
    kernel = ws.root / "kernels" / "add.cpp"
    honest = marker + kernel.read_text()
    kernel.write_text(honest.replace("out[i] = a[i] + b[i];", CHEAT))
    cheat = build_workspace(ws, config)
    assert cheat.ok and cheat.compiled == ("kernels/add.cpp",), cheat.log
    a, b = torch.randn(1000), torch.randn(1000)
    assert torch.equal(load_extension(cheat.module_path).add_forward(a, b), torch.zeros(1000))

    kernel.write_text(honest)
    old = time.time() - 10 * 365 * 86400  # older than the cheat's object
    os.utime(kernel, (old, old))
    restored = build_workspace(ws, config)
    assert restored.ok and restored.key != cheat.key
    assert restored.compiled == ("kernels/add.cpp",)
    assert torch.allclose(load_extension(restored.module_path).add_forward(a, b), a + b)

    other = Workspace.create(add_task(), flavour="cpu", parent=tmp_path)  # another episode, same honest sources
    write_add_kernels(other)
    (other.root / "kernels" / "add.cpp").write_text(honest)
    shared = build_workspace(other, config)
    assert shared.cached and shared.key == restored.key
    assert torch.allclose(load_extension(shared.module_path).add_forward(a, b), a + b)


def test_a_header_edit_recompiles_the_units_that_read_it(cpu_add_build: BuiltWorkspace, tmp_path: Path) -> None:
    """Keys cover every file the compiler read (its depfile), not just the named sources."""
    import torch

    ws = copy_built(cpu_add_build, tmp_path / "ep")
    kernel = ws.root / "kernels" / "add.cpp"
    (ws.root / "kernels" / "detail").mkdir()
    header = ws.root / "kernels" / "detail" / "op.ipp"
    header.write_text(f"// {uuid.uuid4().hex}\nstatic inline float op(float x, float y) {{ return x + y; }}\n")
    edit(kernel, "#include <cstdint>", '#include <cstdint>\n#include "detail/op.ipp"')
    edit(kernel, "out[i] = a[i] + b[i];", "out[i] = op(a[i], b[i]);")
    first = build_workspace(ws, cpu_add_build.config)
    assert first.ok and "kernels/detail/op.ipp" in first.inputs, first.log
    header.write_text(header.read_text().replace("x + y", "x - y"))
    old = time.time() - 86400
    os.utime(header, (old, old))
    second = build_workspace(ws, cpu_add_build.config)
    assert second.ok and second.compiled == ("kernels/add.cpp",) and second.key != first.key
    a, b = torch.randn(64), torch.randn(64)
    assert torch.allclose(load_extension(second.module_path).add_forward(a, b), a - b)


def _build_with_proc_link(args: tuple[str, str]) -> bool:
    parent, cache = args
    ws = Workspace.create(add_task(), flavour="cpu", parent=parent)
    write_add_kernels(ws)
    (ws.root / "kernels" / "x.h").symlink_to("/proc/kmsg")
    os.mkfifo(ws.root / "kernels" / "pipe.h")
    return build_workspace(ws, BuildConfig(cache_dir=Path(cache), timeout_s=900)).ok


@pytest.mark.skipif(not os.access("/proc/kmsg", os.R_OK), reason="needs a readable /proc/kmsg (root)")
def test_a_link_to_proc_kmsg_does_not_hang_the_build(cpu_add_build: BuiltWorkspace, tmp_path: Path) -> None:
    """Content hashing opened kernels/x.h -> /proc/kmsg and waited forever; links are never followed now."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        job = pool.apply_async(_build_with_proc_link, ((str(tmp_path), str(cpu_add_build.config.cache_dir)),))
        assert job.get(timeout=120)  # a hang fails here instead of stalling the suite


_HOLD_WORK_DIR = """
import sys, time
from pathlib import Path
from cuda_gym.build.store import work_dir
with work_dir(Path(sys.argv[1])) as work:
    (work / "torch_extension.h.gch").write_bytes(b"x" * (8 * 2**20))  # a precompiled header being written
    print(work, flush=True)
    time.sleep(600)
"""


def test_a_killed_build_leaves_nothing_behind_after_the_next_start(cpu_add_build: BuiltWorkspace,
                                                                   tmp_path: Path) -> None:
    """A kill during the first build left a 791 MB PCH temporary in the cache; the next start removes it."""
    import signal
    import subprocess
    import sys

    cache = cpu_add_build.config.cache_dir
    proc = subprocess.Popen([sys.executable, "-c", _HOLD_WORK_DIR, str(cache)], stdout=subprocess.PIPE, text=True)
    work = Path(proc.stdout.readline().strip())
    assert (work / "torch_extension.h.gch").is_file()
    legacy = cache / "pch" / ("0" * 24) / ".pch.abc.gch"  # what the old layout left beside the real one
    legacy.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_bytes(b"y")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    old = time.time() - 3600
    for path in (work.with_name(work.name + ".lock"), legacy):
        os.utime(path, (old, old))
    assert work.exists()
    ws = Workspace.create(add_task(), flavour="cpu", parent=tmp_path)
    write_add_kernels(ws)
    assert build_workspace(ws, cpu_add_build.config).ok  # any next start sweeps
    assert not work.exists() and not work.with_name(work.name + ".lock").exists() and not legacy.exists()
    assert list((cache / "tmp").iterdir()) == []


def test_a_live_build_is_never_swept(tmp_path: Path) -> None:
    from cuda_gym.build.store import sweep, work_dir

    with work_dir(tmp_path) as work:
        lock = work.with_name(work.name + ".lock")
        old = time.time() - 3600
        os.utime(lock, (old, old))
        assert sweep(tmp_path) == []
        assert work.is_dir()
    assert not work.exists()


def test_the_snapshot_copies_regular_source_files_only(tmp_path: Path) -> None:
    from cuda_gym.build.files import snapshot

    src = tmp_path / "ws"
    (src / "kernels" / "deep").mkdir(parents=True)
    (src / "kernels" / "a.cu").write_text("a")
    (src / "kernels" / "deep" / "b.tcc").write_text("b")
    (src / "kernels" / "noext").write_text("c")
    (src / "model_new.py").write_text("not a source")
    (src / "binding_registry.h").write_text("tampered")
    (src / "kernels" / "x.h").symlink_to("/proc/kmsg")
    (src / "kernels" / "linked").symlink_to(tmp_path, target_is_directory=True)
    os.mkfifo(src / "kernels" / "pipe.h")
    snap = snapshot(src, tmp_path / "copy", replace={"binding_registry.h": b"pristine"})
    assert set(snap.hashes) == {"kernels/a.cu", "kernels/deep/b.tcc", "kernels/noext", "binding_registry.h"}
    assert (tmp_path / "copy" / "binding_registry.h").read_bytes() == b"pristine"
    assert snap.skipped == {"kernels/x.h": "a symbolic link", "kernels/linked": "a symbolic link",
                            "kernels/pipe.h": "not a regular file"}
    assert not any(p.is_symlink() for p in (tmp_path / "copy").rglob("*"))


# -- red team B5: artifact cap and cache bound ---------------------------------------------------

BLOB = "__attribute__((used)) extern const char cuda_gym_blob[{n}u << 20];\n" \
       "__attribute__((used)) const char cuda_gym_blob[{n}u << 20] = {{1}};\n"


def _files_above(root: Path, limit: int) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and "pch" not in p.relative_to(root).parts
            and p.stat().st_size > limit]


@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandboxed", "direct"])
def test_an_oversized_object_fails_the_build_and_is_never_stored(cpu_add_build: BuiltWorkspace, tmp_path: Path,
                                                                  sandboxed: bool) -> None:
    """B5: a 200 MiB initialised array put 400 MiB per variant into the shared cache. Here 24 MiB against a
    16 MiB cap: the sandboxed compiler cannot write it, and an unsandboxed build refuses to store it."""
    from dataclasses import replace

    from cuda_gym.sandbox import Sandbox

    cap = 16 * 2**20
    config = replace(cpu_add_build.config, max_artifact_bytes=cap)
    ws = Workspace.create(add_task(), flavour="cpu", parent=tmp_path)
    write_add_kernels(ws)
    (ws.root / "kernels" / "blob.cpp").write_text(f"// {uuid.uuid4().hex}\n" + BLOB.format(n=24))
    result = build_workspace(ws, config, sandbox=Sandbox(writable=[]) if sandboxed else None)
    assert not result.ok and result.module_path is None
    assert "16 MiB" in result.log, result.log
    assert _files_above(cache_root(config), cap) == []
    small = Workspace.create(add_task(), flavour="cpu", parent=tmp_path / "small")
    write_add_kernels(small)
    (small.root / "kernels" / "blob.cpp").write_text(f"// {uuid.uuid4().hex}\n" + BLOB.format(n=1))
    assert build_workspace(small, config, sandbox=Sandbox(writable=[]) if sandboxed else None).ok


def test_a_cache_hit_marks_the_module_used(cpu_add_build: BuiltWorkspace, tmp_path: Path) -> None:
    module = Path(cpu_add_build.result.module_path)
    old = time.time() - 7200
    os.utime(module, (old, old))
    result = build_workspace(copy_built(cpu_add_build, tmp_path / "ep"), cpu_add_build.config)
    assert result.cached and result.module_path == module
    assert time.time() - module.stat().st_mtime < 600  # the least recently used go first, not this one


def test_the_cache_evicts_least_recently_used_files_past_its_bound(tmp_path: Path) -> None:
    from cuda_gym.build import store
    from cuda_gym.build.store import EVICT_GRACE_S, install, sweep, touch

    root = tmp_path / "cache"
    blob = tmp_path / "blob"
    blob.write_bytes(b"\1" * 2**20)
    now = time.time()
    files = {}
    for i, (name, age_h) in enumerate([("m_old", 5), ("o_old", 4), ("m_mid", 3), ("o_new", 2), ("m_recent", 0)]):
        path = root / f"{i:064x}" / "cuda_extension.so" if name.startswith("m") else \
            root / "objects" / "ab" / f"ab{i:062x}.o"
        install(blob, path)
        os.utime(path, (now - age_h * 3600, now - age_h * 3600))
        files[name] = path
    install(blob, root / "pch" / "t" / "torch_extension.h.gch")  # counted, never evicted
    touch(files["m_old"])  # used again: now the most recent
    store._LAST_EVICTION.pop(root, None)
    assert sweep(root, max_bytes=10 * 2**20, now=now) == []  # 6 MiB held: under the bound
    assert sweep(root, max_bytes=4 * 2**20, now=now) == []  # one eviction walk per minute and root
    store._LAST_EVICTION.pop(root, None)
    removed = sweep(root, max_bytes=4 * 2**20, now=now)
    # 6 MiB held, bound 4 MiB, evicted down to 90 % of it: the three least recently used past the grace period
    assert set(removed) == {files["o_old"], files["m_mid"], files["o_new"]}
    assert not files["m_mid"].parent.exists()  # a module's folder goes with it
    assert files["m_old"].exists() and files["m_recent"].exists() and (root / "pch" / "t").exists()
    store._LAST_EVICTION.pop(root, None)
    assert sweep(root, max_bytes=2**20, now=now) == []  # what was used within the grace period stays
    assert EVICT_GRACE_S >= 2 * BuildConfig().timeout_s  # longer than a build may run
