"""Workspace: layout from templates, protected files, tamper detection and path confinement."""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path

import pytest

from build_fixtures import add_task
from cuda_gym.errors import ConfigError, ToolError
from cuda_gym.workspace import PROTECTED, Workspace, model_new_stub


@pytest.fixture()
def ws(tmp_path: Path) -> Workspace:
    ws = Workspace.create(add_task(), flavour="cuda", parent=tmp_path)
    yield ws
    ws.close()


def test_create_lays_out_the_cuda_workspace(ws: Workspace) -> None:
    names = sorted(p.name for p in ws.root.iterdir())
    assert names == ["SKILL.md", "binding.cpp", "binding_registry.h", "kernels", "model.py", "model_new.py"]
    assert list((ws.root / "kernels").iterdir()) == []
    assert ws.build_dir.is_dir() and not ws.build_dir.is_relative_to(ws.root)
    assert (ws.root / "model.py").read_text() == add_task().code
    for rel in PROTECTED:
        mode = (ws.root / rel).stat().st_mode
        assert not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), rel
    assert ws.tampered() == []
    assert "REGISTER_BINDING" in (ws.root / "binding_registry.h").read_text()
    assert "PYBIND11_MODULE(cuda_extension" in (ws.root / "binding.cpp").read_text()


def test_cpu_workspace_has_its_own_skill_and_kernel_readme(tmp_path: Path) -> None:
    ws = Workspace.create(add_task(), flavour="cpu", parent=tmp_path)
    skill = (ws.root / "SKILL.md").read_text()
    assert "OpenMP" in skill and "kernels/<name>.cpp" in skill
    assert (ws.root / "kernels" / "README.md").is_file()
    assert ws.sources() == []
    ws.close()
    assert not ws.episode_dir.exists()


@pytest.mark.parametrize("flavour", ["cuda", "cpu"])
def test_skill_states_the_rules_and_rewards(tmp_path: Path, flavour: str) -> None:
    ws = Workspace.create(add_task(), flavour=flavour, parent=tmp_path)
    skill = (ws.root / "SKILL.md").read_text()
    for needle in ("atol = rtol = 1e-2", "5 fresh random inputs", "**3**", "**-1**", "REGISTER_BINDING",
                   "compile", "verify", "profile", "submit", "torch::empty", "state_dict"):
        assert needle in skill, needle
    ws.close()


def test_model_new_stub_copies_the_constructor(ws: Workspace) -> None:
    stub = (ws.root / "model_new.py").read_text()
    tree = ast.parse(stub)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    assert [a.arg for a in init.args.args] == ["self", "scale"]
    assert "import cuda_extension" in stub and "NotImplementedError" in stub


def test_stub_for_a_model_without_arguments() -> None:
    task = add_task()
    code = task.code.replace("def __init__(self, scale: float = 1.0):", "def __init__(self):")
    stub = model_new_stub(type(task)(id="t", source="custom", level=1, name="t", code=code))
    assert "def __init__(self):" in stub


def test_tampering_is_reported(ws: Workspace) -> None:
    binding = ws.root / "binding.cpp"
    binding.chmod(0o644)
    binding.write_text(binding.read_text() + "\n// patched\n")
    (ws.root / "model.py").unlink()
    assert sorted(ws.tampered()) == ["binding.cpp", "model.py"]


def test_symlinked_protected_file_counts_as_tampered(ws: Workspace, tmp_path: Path) -> None:
    copy = tmp_path / "skill_copy.md"
    copy.write_bytes((ws.root / "SKILL.md").read_bytes())
    (ws.root / "SKILL.md").unlink()
    (ws.root / "SKILL.md").symlink_to(copy)
    assert ws.tampered() == ["SKILL.md"]


def test_resolve_confines_paths(ws: Workspace, tmp_path: Path) -> None:
    assert ws.resolve("kernels/add.cu") == ws.root / "kernels" / "add.cu"
    assert ws.resolve(str(ws.root / "model_new.py")) == ws.root / "model_new.py"
    assert ws.resolve("kernels/../model_new.py") == ws.root / "model_new.py"
    for bad in ("../build/x.o", "/etc/passwd", "kernels/../../escape", ""):
        with pytest.raises(ToolError, match="workspace"):
            ws.resolve(bad)
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws.root / "kernels" / "link").symlink_to(outside)
    with pytest.raises(ToolError, match="outside the workspace"):
        ws.resolve("kernels/link/secret.txt")


def test_is_protected(ws: Workspace) -> None:
    assert ws.is_protected("binding.cpp")
    assert ws.is_protected(ws.root / "SKILL.md")
    assert ws.is_protected("kernels/../model.py")
    assert not ws.is_protected("model_new.py")
    assert not ws.is_protected("../binding.cpp")


def test_sources_lists_cuda_and_cpp_files(ws: Workspace) -> None:
    kernels = ws.root / "kernels"
    for name in ("b.cu", "a_binding.cpp", "a.cpp", "notes.txt", "util.cuh"):
        (kernels / name).write_text("")
    assert [p.name for p in ws.sources()] == ["a.cpp", "a_binding.cpp", "b.cu"]


def test_open_adopts_a_directory_and_compares_with_templates(ws: Workspace) -> None:
    adopted = Workspace.open(ws.root, add_task(), "cuda")
    assert adopted.tampered() == []
    assert adopted.build_dir.is_dir() and not adopted.build_dir.is_relative_to(ws.root)
    other_task = type(add_task())(id="x", source="custom", level=1, name="x", code="# another task\n")
    assert Workspace.open(ws.root, other_task, "cuda").tampered() == ["model.py"]
    assert Workspace.open(ws.root, add_task(), "cpu").tampered() == ["SKILL.md"]
    adopted.close()
    assert ws.root.is_dir() and not adopted.build_dir.exists()


def test_open_refuses_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="not a directory"):
        Workspace.open(tmp_path / "nope", add_task())


def test_unknown_flavour_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="flavour"):
        Workspace.create(add_task(), flavour="rocm", parent=tmp_path)


def test_close_removes_read_only_files(tmp_path: Path) -> None:
    ws = Workspace.create(add_task(), parent=tmp_path)
    for rel in ("kernels/deep/x", "kernels/wx"):
        (ws.root / rel).mkdir(parents=True)
        (ws.root / rel / "f").write_text("x")
    # What an agent's bash may do (as a non-root user, close must undo it): folders it cannot list or enter.
    for rel, mode in (("kernels/deep/x", 0o000), ("kernels/deep", 0o000), ("kernels/wx", 0o300), ("kernels", 0o555)):
        (ws.root / rel).chmod(mode)
    ws.close(keep=True)
    assert ws.root.exists()
    ws.close()
    assert not ws.episode_dir.exists()
    assert os.listdir(tmp_path) == []


@pytest.mark.timeout(30)
def test_resolve_never_raises_or_blocks_on_links_the_agent_made(ws: Workspace) -> None:
    os.symlink("loop", ws.root / "loop")
    os.mkfifo(ws.root / "kernels" / "fifo.cu")
    assert ws.resolve("loop") == ws.root / "loop"  # pathlib's resolve raised RuntimeError here
    assert ws.resolve("loop/deeper").is_relative_to(ws.root)
    assert ws.resolve("kernels/fifo.cu") == ws.root / "kernels" / "fifo.cu"
    os.symlink("/proc/kmsg", ws.root / "kernels" / "x.h")
    with pytest.raises(ToolError, match="outside the workspace"):
        ws.resolve("kernels/x.h")
    with pytest.raises(ToolError, match="lone surrogate"):
        ws.resolve("\ud800.cu")


@pytest.mark.timeout(30)
def test_tampered_and_sources_never_follow_links_or_open_fifos(ws: Workspace, tmp_path: Path) -> None:
    model = ws.root / "model.py"
    model.chmod(0o644)
    model.unlink()
    os.mkfifo(model)  # read_bytes() on it blocked forever
    assert ws.tampered() == ["model.py"]
    (tmp_path / "host.cu").write_text("__global__ void k() {}\n")
    os.symlink(tmp_path / "host.cu", ws.root / "kernels" / "linked.cu")
    os.mkfifo(ws.root / "kernels" / "pipe.cu")
    (ws.root / "kernels" / "real.cu").write_text("")
    assert [p.name for p in ws.sources()] == ["real.cu"]
