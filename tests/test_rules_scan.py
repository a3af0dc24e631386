"""Which files the static rules read (cuda_gym.judge.rules.scan): what the compiler reads, no links, no special files."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from cuda_gym.judge.rules import check_submission, scan_workspace

ESCAPE = 'static inline void escape() { PyRun_SimpleString("import builtins"); }\n'
BINDING = """#include <torch/extension.h>
#include "../binding_registry.h"
{includes}
static void bind(pybind11::module_& m) {{}}
REGISTER_BINDING(x, bind);
"""


def workspace(tmp_path: Path, includes: str, files: dict[str, str]) -> Path:
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    (ws / "binding_registry.h").write_text("#pragma once\n#include <pybind11/pybind11.h>\n")
    (ws / "model_new.py").write_text("import cuda_extension\n")
    (ws / "kernels" / "x_binding.cpp").write_text(BINDING.format(includes=includes))
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    return ws


def found(ws: Path, **kwargs) -> set[tuple[str, str]]:
    return {(v.rule, v.file) for v in check_submission(ws, "cpu", **kwargs)}


@pytest.mark.parametrize(
    "include, path",
    [
        ('#include "impl.ipp"', "kernels/impl.ipp"),
        ('#include "detail/impl.tcc"', "kernels/detail/impl.tcc"),
        ('#include "impl"', "kernels/impl"),
        ('#include "impl.hxx"', "kernels/impl.hxx"),
        ('#include "lib/impl.h"', "lib/impl.h"),  # found through -I. (the workspace root)
        ("#include <lib/impl.h>", "lib/impl.h"),
        ('#include "../lib/impl.h"', "lib/impl.h"),
    ],
)
def test_every_file_the_compiler_includes_is_checked(tmp_path: Path, include: str, path: str) -> None:
    """The old scan read only the root and kernels/ with a few suffixes: all of these passed."""
    ws = workspace(tmp_path, include, {path: ESCAPE})
    assert found(ws) == {("native-python", path)}


def test_includes_are_followed_transitively_and_into_device_code(tmp_path: Path) -> None:
    ws = workspace(tmp_path, '#include "a.h"', {"kernels/a.h": '#include "deep/b.inc"\n',
                                                "kernels/deep/b.inc": "void f() { system(\"ls\"); }\n"})
    (ws / "kernels" / "k.cu").write_text('#include "ptx.ipp"\n')
    (ws / "kernels" / "ptx.ipp").write_text(
        '__device__ float ld(const float* p) { float v; asm("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(p)); '
        "return v; }\n")
    assert found(ws) == {("process", "kernels/deep/b.inc")}  # PTX in a header of a .cu is device code
    assert set(scan_workspace(ws).cpp) == {"kernels/x_binding.cpp", "kernels/a.h", "kernels/deep/b.inc",
                                           "kernels/k.cu", "kernels/ptx.ipp"}


def test_files_nobody_compiles_are_not_checked_unless_the_compiler_read_them(tmp_path: Path) -> None:
    ws = workspace(tmp_path, "", {"kernels/old/unused.cu": ESCAPE, "notes/escape.h": ESCAPE})
    assert found(ws) == set()
    assert found(ws, compiled=["notes/escape.h"]) == {("native-python", "notes/escape.h")}


def test_a_link_to_proc_is_a_violation_and_never_read(tmp_path: Path) -> None:
    """kernels/x.h -> /proc/kmsg hung the env: hashing and checking opened it and waited forever."""
    ws = workspace(tmp_path, '#include "x.h"\n#include "../linked/y.h"', {})
    (ws / "kernels" / "x.h").symlink_to("/proc/kmsg")
    (ws / "linked").symlink_to(tmp_path, target_is_directory=True)
    started = time.perf_counter()
    result = found(ws)
    assert time.perf_counter() - started < 1.0
    # the links themselves, and the #include lines that reach them
    assert result == {("io", "kernels/x.h"), ("io", "linked"), ("io", "kernels/x_binding.cpp")}


def test_a_fifo_included_is_unreadable_not_a_hang(tmp_path: Path) -> None:
    ws = workspace(tmp_path, '#include "pipe.h"', {})
    os.mkfifo(ws / "kernels" / "pipe.h")
    assert found(ws) == {("unreadable", "kernels/pipe.h"), ("unreadable", "kernels/x_binding.cpp")}


def test_an_oversized_source_is_unreadable(tmp_path: Path) -> None:
    ws = workspace(tmp_path, '#include "big.h"', {"kernels/big.h": "//" + "x" * (3 * 2**20) + "\n"})
    assert found(ws) == {("unreadable", "kernels/big.h")}


def test_a_digraph_include_is_followed(tmp_path: Path) -> None:
    """Red team B6: ``%:include`` is ``#include`` to the compiler; the resolver now reads it so too."""
    ws = workspace(tmp_path, '%:include "detail/escape.ipp"', {"kernels/detail/escape.ipp": ESCAPE})
    assert found(ws) == {("native-python", "kernels/detail/escape.ipp")}
