"""The file tools and glob/grep on a real temporary workspace: confinement, protected files, budgets, links, messages."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from cuda_gym.errors import ToolError
from cuda_gym.tools import files, search
from cuda_gym.tools.files import ToolBudgets
from cuda_gym.workspace import PROTECTED


def test_write_read_round_trip(ws: Any) -> None:
    msg = files.write_file(ws, "kernels/sub/dir/op.cu", "line one\nline two\n")
    assert msg == "created kernels/sub/dir/op.cu (18 bytes, 2 lines)"
    assert (Path(ws.root) / "kernels/sub/dir/op.cu").read_text() == "line one\nline two\n"
    out = files.read_file(ws, "kernels/sub/dir/op.cu")
    assert "     1\tline one\n     2\tline two\n" in out
    assert "lines 1-2 of 2" in out
    assert files.write_file(ws, "kernels/sub/dir/op.cu", "x").startswith("overwrote")


def test_write_keeps_content_exactly(ws: Any) -> None:
    content = "a\r\nb\u00e9\U0001f680\n\tc"
    files.write_file(ws, "kernels/x.cpp", content)
    assert (Path(ws.root) / "kernels/x.cpp").read_bytes() == content.encode("utf-8")


def test_read_ranges_and_budget(ws: Any) -> None:
    files.write_file(ws, "big.txt", "".join(f"row {i}\n" for i in range(1, 1001)))
    out = files.read_file(ws, "big.txt", 10, 12)
    assert out.splitlines()[:3] == ["    10\trow 10", "    11\trow 11", "    12\trow 12"]
    assert "lines 10-12 of 1000" in out
    small = ToolBudgets(read_chars=200)
    out = files.read_file(ws, "big.txt", budgets=small)
    assert len(out) < 400
    assert "start_line=" in out and "read on" in out
    with pytest.raises(ToolError, match="past the end of big.txt"):
        files.read_file(ws, "big.txt", 2000)
    with pytest.raises(ToolError, match="before start_line"):
        files.read_file(ws, "big.txt", 5, 4)
    long_line = "y" * 5000
    files.write_file(ws, "long.txt", long_line)
    assert "line cut, 5000 characters" in files.read_file(ws, "long.txt")


def test_read_errors(ws: Any) -> None:
    with pytest.raises(ToolError, match="no such file: nope.cu"):
        files.read_file(ws, "nope.cu")
    with pytest.raises(ToolError, match="is a directory"):
        files.read_file(ws, "kernels")
    (Path(ws.root) / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02")
    with pytest.raises(ToolError, match="binary file"):
        files.read_file(ws, "blob.bin")
    (Path(ws.root) / "latin.txt").write_bytes(b"caf\xe9\n")
    with pytest.raises(ToolError, match="not UTF-8"):
        files.read_file(ws, "latin.txt")
    (Path(ws.root) / "empty.txt").write_text("")
    assert "empty file" in files.read_file(ws, "empty.txt")
    with pytest.raises(ToolError, match="not opened"):
        files.read_file(ws, "model_new.py", budgets=ToolBudgets(max_file_bytes=3))


def test_protected_files_are_readable_not_writable(ws: Any) -> None:
    for name in PROTECTED:
        before = (Path(ws.root) / name).read_bytes()
        assert files.read_file(ws, name)
        with pytest.raises(ToolError, match="protected"):
            files.write_file(ws, name, "hacked")
        with pytest.raises(ToolError, match="protected"):
            files.edit_file(ws, name, before.decode()[:3], "zz")
        with pytest.raises(ToolError, match="protected"):
            files.multi_edit(ws, name, [{"old_string": before.decode()[:3], "new_string": "zz"}])
        assert (Path(ws.root) / name).read_bytes() == before
    # Through another spelling of the same path.
    with pytest.raises(ToolError, match="protected"):
        files.write_file(ws, "kernels/../model.py", "hacked")


def test_symlink_to_protected_file_is_refused(ws: Any) -> None:
    os.symlink("model.py", Path(ws.root) / "alias.py")
    with pytest.raises(ToolError):
        files.write_file(ws, "alias.py", "hacked")
    assert "hacked" not in (Path(ws.root) / "model.py").read_text()


@pytest.mark.parametrize("path", ["../escape.txt", "/etc/passwd", "kernels/../../x", "/tmp/x"])
def test_paths_outside_are_refused(ws: Any, path: str) -> None:
    with pytest.raises(ToolError):
        files.write_file(ws, path, "x")
    with pytest.raises(ToolError):
        files.read_file(ws, path)
    assert not (Path(ws.root).parent / "escape.txt").exists()


def test_symlinked_dir_out_is_refused(ws: Any, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    os.symlink(outside, Path(ws.root) / "link")
    with pytest.raises(ToolError):
        files.read_file(ws, "link/secret.txt")
    with pytest.raises(ToolError):
        files.write_file(ws, "link/new.txt", "x")
    assert not (outside / "new.txt").exists()
    assert "secret" not in search.glob(ws, "**/*")
    assert "no matches" in search.grep(ws, "secret")
    os.symlink(outside / "secret.txt", Path(ws.root) / "file_link")
    assert "no matches" in search.grep(ws, "secret")


def test_write_to_directory_is_refused(ws: Any) -> None:
    with pytest.raises(ToolError, match="is a directory"):
        files.write_file(ws, "kernels", "x")
    files.write_file(ws, "afile", "x")
    with pytest.raises(ToolError, match="not a directory"):
        files.write_file(ws, "afile/child.txt", "x")


def test_edit_file(ws: Any) -> None:
    files.write_file(ws, "k.cu", "int a = 1;\nint b = 1;\nint c = 2;\n")
    with pytest.raises(ToolError, match="0 matches"):
        files.edit_file(ws, "k.cu", "int d", "int e")
    with pytest.raises(ToolError, match="different leading/trailing whitespace"):
        files.edit_file(ws, "k.cu", "  int c = 2;", "x")
    with pytest.raises(ToolError, match="2 matches for old_string, must be unique.*replace_all"):
        files.edit_file(ws, "k.cu", "= 1;", "= 3;")
    with pytest.raises(ToolError, match="identical"):
        files.edit_file(ws, "k.cu", "int c", "int c")
    assert files.edit_file(ws, "k.cu", "int c = 2;", "int c = 5;") == \
        "edited k.cu: replaced 1 occurrence (first at line 3)"
    assert "2 occurrences" in files.edit_file(ws, "k.cu", "= 1;", "= 3;", replace_all=True)
    assert (Path(ws.root) / "k.cu").read_text() == "int a = 3;\nint b = 3;\nint c = 5;\n"
    with pytest.raises(ToolError, match="no such file"):
        files.edit_file(ws, "missing.cu", "a", "b")


def test_multi_edit_is_atomic(ws: Any) -> None:
    original = "alpha\nbeta\ngamma\n"
    files.write_file(ws, "m.txt", original)
    with pytest.raises(ToolError, match="edit 2 of 3 \\(nothing was written\\).*0 matches"):
        files.multi_edit(ws, "m.txt", [
            {"old_string": "alpha", "new_string": "ALPHA"},
            {"old_string": "delta", "new_string": "DELTA"},
            {"old_string": "gamma", "new_string": "GAMMA"},
        ])
    assert (Path(ws.root) / "m.txt").read_text() == original
    # Edits apply in order: the second sees the first's result.
    msg = files.multi_edit(ws, "m.txt", [
        {"old_string": "alpha", "new_string": "a-a"},
        {"old_string": "a-a", "new_string": "A", "replace_all": True},
        {"old_string": "gamma", "new_string": "G"},
    ])
    assert msg == "edited m.txt: applied 3 edits (3 replacements)"
    assert (Path(ws.root) / "m.txt").read_text() == "A\nbeta\nG\n"


def test_glob(ws: Any) -> None:
    files.write_file(ws, "kernels/a.cu", "")
    files.write_file(ws, "kernels/b_binding.cpp", "")
    files.write_file(ws, "kernels/deep/c.cu", "")
    assert search.glob(ws, "kernels/*.cu").splitlines()[0] == "kernels/a.cu"
    out = search.glob(ws, "**/*.cu")
    assert "kernels/a.cu" in out and "kernels/deep/c.cu" in out and "[2 paths match" in out
    assert "kernels/deep/" in search.glob(ws, "kernels/*")
    assert "no paths match" in search.glob(ws, "*.nothing")
    for bad in ["../*", "/etc/*", "kernels/../../*"]:
        with pytest.raises(ToolError):
            search.glob(ws, bad)
    for i in range(30):
        files.write_file(ws, f"many/f{i:02d}.txt", "")
    out = search.glob(ws, "many/*", budgets=ToolBudgets(glob_results=5))
    assert len(out.splitlines()) == 6 and "30 paths match" in out and "showing the first 5" in out


def test_grep(ws: Any) -> None:
    files.write_file(ws, "kernels/a.cu", "__global__ void gelu() {}\nint x;\n__global__ void relu() {}\n")
    files.write_file(ws, "kernels/b.cpp", "void gelu_launch();\n")
    (Path(ws.root) / "kernels/blob.bin").write_bytes(b"gelu\x00\x01")
    out = search.grep(ws, r"gel(u)", path="kernels")
    assert "kernels/a.cu:1: __global__ void gelu() {}" in out
    assert "kernels/b.cpp:1: void gelu_launch();" in out
    assert "blob.bin" not in out
    assert "2 matching lines in 2 files" in out
    only_cu = search.grep(ws, "gelu", glob="*.cu")
    assert "a.cu" in only_cu and "b.cpp" not in only_cu
    assert "kernels/a.cu:3:" in search.grep(ws, "relu", path="kernels/a.cu")
    assert "no matches" in search.grep(ws, "tanh", path="kernels")
    with pytest.raises(ToolError, match="invalid regular expression"):
        search.grep(ws, "(unclosed")
    with pytest.raises(ToolError, match="no such file"):
        search.grep(ws, "x", path="nothere")
    with pytest.raises(ToolError):
        search.grep(ws, "x", path="../")
    files.write_file(ws, "rep.txt", "hit\n" * 50)
    capped = search.grep(ws, "hit", path="rep.txt", budgets=ToolBudgets(grep_matches=3))
    assert capped.count("rep.txt:") == 3 and "50 matching lines" in capped and "showing the first 3" in capped


@pytest.mark.timeout(60)
def test_grep_pathological_regex_stops(ws: Any) -> None:
    files.write_file(ws, "evil.txt", ("a" * 40 + "!\n") * 3)
    out = search.grep(ws, r"(a|a)+b", budgets=ToolBudgets(grep_seconds=0.5))
    assert "grep stopped: the search took longer than 0.5 s; simplify" in out


# --- budgets: every tool is bounded before it builds its result (issue 12) -----------------------

@pytest.mark.timeout(30)
@pytest.mark.parametrize("pattern, message", [
    ("a{1000000000}", "repeat count 1000000000 is over 1000"),   # regex allocated 2.8+ GiB for it
    ("(?:a{1000}){1000}", "expands to more than 20000 items"),     # 276 MiB
    ("(?R)", "invalid regular expression"),                       # recursion: MemoryError
    ("(?1)(a)", "invalid regular expression"),
    ("x" * 1001, "at most 1000"),
    ("(" * 600 + ")" * 600, "grep"),
])
def test_grep_refuses_memory_hungry_patterns(ws: Any, pattern: str, message: str) -> None:
    files.write_file(ws, "a.txt", "a" * 2000 + "\n")
    with pytest.raises(ToolError, match=message.replace("(", r"\(")):
        search.grep(ws, pattern)


def test_grep_reads_braces_as_python_re_does(ws: Any) -> None:
    files.write_file(ws, "k.cpp", "abc\nint f() {e<=1}\nxx\n")
    # The `regex` module alone reads {e<=1} as "at most one error": 'abd' would match 'abc'.
    assert "no matches" in search.grep(ws, "abd{e<=1}")
    assert "no matches" in search.grep(ws, "a[[]{e<=1}")  # a brace after a class holding '['
    assert "k.cpp:2:" in search.grep(ws, "f\\(\\) {e<=1}")
    assert "k.cpp:3:" in search.grep(ws, "x{2}")


def test_grep_stops_at_file_and_byte_budgets(ws: Any) -> None:
    for i in range(20):
        files.write_file(ws, f"many/f{i:02d}.txt", "hit\n" * 100)
    out = search.grep(ws, "hit", path="many", budgets=ToolBudgets(grep_files=5))
    assert "500 matching lines in 5 files" in out and "grep stopped after 5 files" in out
    out = search.grep(ws, "hit", path="many", budgets=ToolBudgets(grep_bytes=1000))
    assert "grep stopped after reading 800 bytes (budget 1000)" in out


@pytest.mark.timeout(30)
def test_multi_edit_that_doubles_a_file_is_refused(ws: Any) -> None:
    original = "ab" * 1500  # 3 KB; 50 doublings would be 3 PB
    files.write_file(ws, "m.txt", original)
    edits = [{"old_string": "ab", "new_string": "abab", "replace_all": True}] * 50
    with pytest.raises(ToolError, match=r"edit 12 of 50 \(nothing was written\).*over the budget of 8388608 bytes"):
        files.multi_edit(ws, "m.txt", edits)
    assert (Path(ws.root) / "m.txt").read_text() == original


@pytest.mark.timeout(30)
def test_edit_result_over_the_file_budget_is_refused_before_it_is_built(ws: Any) -> None:
    files.write_file(ws, "k.txt", "a" * 100_000)
    with pytest.raises(ToolError, match="would make the file 20000000000 bytes, over the budget"):
        files.edit_file(ws, "k.txt", "a", "z" * 200_000, replace_all=True)  # 20 GB if built
    small = ToolBudgets(max_file_bytes=1000)
    with pytest.raises(ToolError, match="would be 1001 bytes, over the budget of 1000 bytes per file"):
        files.write_file(ws, "w.txt", "x" * 1001, budgets=small)
    assert not (Path(ws.root) / "w.txt").exists()


def test_workspace_total_budget(ws: Any) -> None:
    usage = files.workspace_usage(Path(ws.root), 1000)
    assert usage is not None
    budgets = ToolBudgets(workspace_bytes=usage[0] + 20_000)
    files.write_file(ws, "one.txt", "x" * 5000, budgets=budgets)
    with pytest.raises(ToolError, match=f"bring the workspace to {usage[0] + 20_000 + 1} bytes, over its budget"):
        files.write_file(ws, "two.txt", "x" * 15_001, budgets=budgets)
    files.write_file(ws, "one.txt", "x" * 100, budgets=budgets)  # replacing a file counts its old size out
    files.write_file(ws, "two.txt", "x" * 15_000, budgets=budgets)
    with pytest.raises(ToolError, match="more than 3 files and folders"):
        files.write_file(ws, "three.txt", "x", budgets=ToolBudgets(workspace_entries=3))


@pytest.mark.timeout(30)
def test_nested_globstars_are_merged_and_bounded(ws: Any) -> None:
    deep = "/".join(f"d{i}" for i in range(12))
    files.write_file(ws, f"{deep}/leaf.cpp", "")
    files.write_file(ws, "kernels/k.cpp", "")
    plain = search.glob(ws, "**/*.cpp")
    assert f"{deep}/leaf.cpp" in plain and "kernels/k.cpp" in plain
    nested = search.glob(ws, "/".join(["**"] * 12) + "/*.cpp")  # pathlib took minutes on this shape
    assert nested.splitlines()[:2] == plain.splitlines()[:2]
    with pytest.raises(ToolError, match="too complex"):
        search.glob(ws, "**/a*/**/b*/**/c*/**/d*")
    with pytest.raises(ToolError, match="too complex"):
        search.glob(ws, "*" + "?" * 20)
    assert "kernels/" in search.glob(ws, "kernels/**") and "kernels/k.cpp" in search.glob(ws, "kernels/**")


def test_glob_stops_at_the_entry_budget(ws: Any) -> None:
    for i in range(60):
        files.write_file(ws, f"many/f{i:02d}.txt", "")
    out = search.glob(ws, "**/*.txt", budgets=ToolBudgets(glob_entries=30))
    assert "glob stopped after 30 directory entries" in out and "narrower pattern" in out


# --- links, FIFOs and devices the agent made -------------------------------------------------------

@pytest.mark.timeout(30)
def test_fifo_and_device_links_never_block_or_leak(ws: Any) -> None:
    root = Path(ws.root)
    os.mkfifo(root / "kernels" / "fifo.h")
    os.symlink("/proc/kmsg", root / "kernels" / "x.h")
    os.symlink("/dev/zero", root / "kernels" / "zero.h")
    files.write_file(ws, "kernels/k.cpp", "#include \"fifo.h\"\n")
    with pytest.raises(ToolError, match="a FIFO, not a regular file"):
        files.read_file(ws, "kernels/fifo.h")
    with pytest.raises(ToolError, match="a FIFO"):
        files.edit_file(ws, "kernels/fifo.h", "a", "b")
    for link in ("kernels/x.h", "kernels/zero.h"):
        with pytest.raises(ToolError, match="outside the workspace"):
            files.read_file(ws, link)
        with pytest.raises(ToolError, match="outside the workspace"):
            files.write_file(ws, link, "x")
    out = search.grep(ws, "include", path="kernels")  # walks past the FIFO and links without opening them
    assert "kernels/k.cpp:1:" in out and "1 matching lines in 1 files" in out
    assert "kernels/fifo.h" in search.glob(ws, "kernels/*")
    with pytest.raises(ToolError, match="a FIFO"):  # named by the agent: say why, do not skip silently
        search.grep(ws, "x", path="kernels/fifo.h")


def test_link_loops_and_bad_names_are_tool_errors(ws: Any) -> None:
    root = Path(ws.root)
    os.symlink("loop", root / "loop")
    for call in (lambda: files.read_file(ws, "loop"), lambda: files.write_file(ws, "loop/x", "x"),
                 lambda: files.edit_file(ws, "loop", "a", "b"), lambda: search.grep(ws, "x", path="loop")):
        with pytest.raises(ToolError):  # pathlib's resolve raised RuntimeError("Symlink loop")
            call()
    with pytest.raises(ToolError, match="too long"):
        files.write_file(ws, "a" * 300, "x")
    with pytest.raises(ToolError, match="lone surrogate"):
        files.write_file(ws, "\ud800.cu", "x")
    files.write_file(ws, "afile", "x")
    with pytest.raises(ToolError, match="not a directory"):
        files.read_file(ws, "afile/child.txt")


# --- atomic writes ----------------------------------------------------------------------------------

def test_a_failed_write_keeps_the_file(ws: Any) -> None:
    target = Path(ws.root) / "model_new.py"
    before = target.read_bytes()
    with pytest.raises(ToolError, match=r"content holds a lone surrogate \(\\ud800\) at character 3"):
        files.write_file(ws, "model_new.py", "abc\ud800")  # this used to truncate the file first
    with pytest.raises(ToolError, match="new_string holds a lone surrogate"):
        files.edit_file(ws, "model_new.py", "import", "import\udfff")
    with pytest.raises(ToolError, match="new_string of edit 2 holds a lone surrogate"):
        files.multi_edit(ws, "model_new.py", [{"old_string": "import", "new_string": "x"},
                                              {"old_string": "x", "new_string": "\ud800"}])
    assert target.read_bytes() == before
    assert [p.name for p in Path(ws.root).iterdir() if p.name.endswith(".tmp")] == []


def test_writes_replace_atomically_and_keep_the_mode(ws: Any) -> None:
    script = Path(ws.root) / "run.sh"
    files.write_file(ws, "run.sh", "#!/bin/sh\necho 1\n")
    script.chmod(0o755)
    inode = script.stat().st_ino
    files.edit_file(ws, "run.sh", "echo 1", "echo 2")
    assert script.read_text() == "#!/bin/sh\necho 2\n"
    assert script.stat().st_mode & 0o777 == 0o755
    assert script.stat().st_ino != inode  # a new file renamed over the old one
    # A link the agent planted where a temporary might go is never written through.
    outside = Path(ws.root).parent / "outside.txt"
    for name in (".run.sh.tmp", ".run.sh.0.0.tmp"):
        os.symlink(outside, Path(ws.root) / name)
    files.write_file(ws, "run.sh", "x")
    assert not outside.exists()
