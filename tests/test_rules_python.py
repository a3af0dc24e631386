"""Python checks of the static rules (cuda_gym.judge.rules.python_checks) on real sources."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from cuda_gym.judge.rules import RuleConfig, check_python, check_submission


def py_rules(code: str, flavour: str = "cuda") -> set[str]:
    return {v.rule for v in check_python(textwrap.dedent(code), "model_new.py", RuleConfig(flavour=flavour))}


HONEST = """
import torch
import torch.nn as nn
import cuda_extension

class ModelNew(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k)
        self.extra = nn.Parameter(torch.randn(cout))
        nn.init.zeros_(self.extra)

    def forward(self, x):
        n, c, h, w = x.shape
        x = x.contiguous().view(n, c, h * w).permute(0, 2, 1).reshape(n, h, w, c)
        out = torch.empty((n, self.conv.out_channels, h, w), device=x.device, dtype=x.dtype)
        cuda_extension.run(x, self.conv.weight, out, torch.cuda.current_stream().cuda_stream)
        return out.unsqueeze(0).squeeze(0).to(x.device)
"""


def test_honest_python_is_clean() -> None:
    assert py_rules(HONEST) == set()


@pytest.mark.parametrize(
    "snippet, rule",
    [
        ("y = torch.matmul(x, x)", "torch-compute"),
        ("y = x @ x", "torch-compute"),
        ("y = x.sum(dim=1)", "torch-compute"),
        ("y = torch.ops.aten.mm(x, x)", "torch-compute"),
        ("y = torch.ops.mkldnn._convolution_pointwise(x, w, None, [0], [1], [1], 1, 'none', [], '')", "torch-compute"),
        ("y = torch.ops.inductor.accumulate_grad_(x, x)", "torch-compute"),
        ("y = torch._C._nn.gelu(x)", "torch-compute"),
        ("y = getattr(torch, 'relu')(x)", "torch-compute"),
        ("y = self.conv(x)", "torch-compute"),
        ("y = self.conv.forward(x)", "torch-compute"),
        ("y = super().forward(x)", "fallback"),
        ("import gc; y = gc.get_objects()", "introspection"),
        ("y = sys._getframe(1).f_locals", "introspection"),
        ("y = eval('x')", "introspection"),
        ("import subprocess", "process"),
        ("os.system('true')", "process"),
        ("s = torch.cuda.Stream()", "stream"),
        ("g = torch.cuda.CUDAGraph()", "stream"),
        ("open('/tmp/x', 'w').write('1')", "io"),
        ("os.environ['CUDA_LAUNCH_BLOCKING'] = '1'", "io"),
        ("torch.save(x, 'x.pt')", "io"),
        ("y = x.half()", "precision"),
        ("y = x.to(torch.bfloat16)", "precision"),
        ("torch.backends.cuda.matmul.allow_tf32 = True", "precision"),
        ("self.calls += 1", "memoisation"),
        ("y = CACHE.get(x.data_ptr())", "memoisation"),
        ("torch.testing.assert_close = print", "checker-patch"),
        ("torch.cuda.Event.elapsed_time = lambda *a: 0.0", "timer-patch"),
        ("y = torch.Tensor._make_subclass(Lazy, x)", "tensor-subclass"),
        ("y = x.cpu()", "host-compute"),
    ],
)
def test_python_rule(snippet: str, rule: str) -> None:
    code = f"""
import os, sys
import torch
import torch.nn as nn
CACHE = {{}}

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3)

    def forward(self, x):
        {snippet}
        return x
"""
    assert rule in py_rules(code)


def test_python_allowed_patterns() -> None:
    code = """
    import os
    import torch
    import torch.nn as nn
    from torch.utils.cpp_extension import load_inline
    os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"
    try:
        import cuda_extension
    except ImportError:
        import cuda_extension_fallback_build as cuda_extension

    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.names = set()
            self.names.add("a")

        def forward(self, x):
            size = x.size(0) * 2 + x.shape[1]
            out = torch.zeros(size, device=x.device, dtype=torch.float32)
            cuda_extension.relu(x, out)
            torch.ops.my_ext.fused(x, out)
            return out.view(-1)
    """
    assert py_rules(code) == set()


def test_comments_and_strings_do_not_count() -> None:
    code = '''
    import torch
    import cuda_extension
    # torch.matmul(x, x) would be compute
    DOC = "x.relu() and torch.cuda.Stream() in a string"

    def forward(x):
        """F.relu(x) in a docstring."""
        return cuda_extension.f(x)
    '''
    assert py_rules(code) == set()


SINGLE_FILE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = """
#include <torch/extension.h>
__global__ void k(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    k<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return %s;
}
"""
cpp_src = "torch::Tensor relu(torch::Tensor x);"
ext = load_inline(name="relu_ext", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["relu"],
                  extra_cuda_cflags=[%s])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x)
'''


def test_single_file_inline_sources(tmp_path: Path) -> None:
    honest = tmp_path / "honest.py"
    honest.write_text(SINGLE_FILE % ("y", '"-O3"'))
    assert check_submission(honest) == []
    hack = tmp_path / "hack.py"
    hack.write_text(SINGLE_FILE % ("at::relu(x)", '"-O3", "--use_fast_math"'))
    found = check_submission(hack)
    assert {v.rule for v in found} == {"torch-compute", "precision"}
    compute = next(v for v in found if v.rule == "torch-compute")
    assert hack.read_text().splitlines()[compute.line - 1].strip().startswith("return at::relu")




# -- agent input never breaks the checker -------------------------------------------------------

def _long_sum(terms: int) -> str:
    return f"""
import torch
import torch.nn as nn
import cuda_extension

class ModelNew(nn.Module):
    def forward(self, x):
        y = {" + ".join(["x.relu()"] + ["x"] * terms)}
        return cuda_extension.f(y)
"""


def test_a_500_term_sum_is_checked_not_an_exception() -> None:
    """The recursive visitor overflowed here (a JudgeError for the agent's -1); the walk is iterative now."""
    found = check_python(_long_sum(500), "model_new.py")
    assert [(v.rule, v.line) for v in found] == [("torch-compute", 8)]  # the deepest operand is still seen


def test_sources_too_deep_for_python_itself_are_violations_or_left_to_the_worker() -> None:
    assert [v.rule for v in check_python(_long_sum(5000), "model_new.py")] == ["unreadable"]
    assert [v.rule for v in check_python("y = " + "-" * 100_000 + "x\n", "model_new.py")] == ["unreadable"]
    # A SyntaxError ("too many nested parentheses") is the worker's to report, with Python's message.
    assert check_python("y = " + "(" * 5000 + "x" + ")" * 5000 + "\n", "model_new.py") == []


def test_a_long_string_concatenation_in_load_inline_is_read(tmp_path: Path) -> None:
    parts = " + ".join(f'"int f{i}(int x) {{ return x; }}\\n"' for i in range(600))
    code = f"""
from torch.utils.cpp_extension import load_inline
src = {parts} + "torch::Tensor g(torch::Tensor x) {{ return at::relu(x); }}"
ext = load_inline(name="e", cpp_sources=src, functions=["g"])
"""
    single = tmp_path / "single.py"
    single.write_text(code)
    assert {v.rule for v in check_submission(single, "cpu")} == {"torch-compute"}


def test_symlinked_kernels_folder_is_not_walked(tmp_path: Path) -> None:
    """A kernels/ link to a big tree (the host's virtualenv) made the checker walk it for minutes."""
    big = tmp_path / "big"
    for i in range(200):
        (big / f"d{i}").mkdir(parents=True)
        (big / f"d{i}" / "m.py").write_text("import gc\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "model_new.py").write_text("import cuda_extension\n")
    (ws / "kernels").symlink_to(big, target_is_directory=True)
    started = time.perf_counter()
    found = check_submission(ws, "cpu")
    assert time.perf_counter() - started < 1.0
    assert [(v.rule, v.file) for v in found] == [("io", "kernels")]


def test_a_fifo_named_like_python_is_not_read(tmp_path: Path) -> None:
    import os

    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    (ws / "model_new.py").write_text("import cuda_extension\n")
    os.mkfifo(ws / "helper.py")  # opening it for reading would block forever
    os.mkfifo(ws / "kernels" / "k.cpp")
    found = check_submission(ws, "cpu")
    assert sorted((v.rule, v.file) for v in found) == [("unreadable", "helper.py"), ("unreadable", "kernels/k.cpp")]


# -- red team B4: load_inline sources the checker cannot read -----------------------------------

_INLINE_HEAD = "import textwrap\nfrom torch.utils.cpp_extension import load_inline\nN = 256\n"


@pytest.mark.parametrize(
    "tail",
    [
        'SRC = "void f() {}"\next = load_inline(name="e", cpp_sources=SRC.replace("\\r", ""), functions=["f"])\n',
        'ext = load_inline("e", open("k.cpp").read())\n',
        'PARTS = ["void f() {}"]\next = load_inline("e", PARTS[0])\n',
        'def build(src):\n    return load_inline("e", cpp_sources=src)\n',
        'SRC = "void f() {}"\nSRC = SRC.swapcase()\next = load_inline("e", SRC)\n',
        'ext = load_inline("e", "", cuda_sources=bytes(b"void f() {}").decode())\n',
    ],
)
def test_load_inline_sources_that_do_not_resolve_are_a_violation(tail: str) -> None:
    """B4: ``cpp_sources=SRC.replace(...)`` compiled at::mul under a dispatch-key guard and passed with none."""
    found = check_python(_INLINE_HEAD + tail, "solution.py", RuleConfig(flavour="cpu"))
    assert "unreadable" in {v.rule for v in found}
    assert all(v.line and v.line > 3 for v in found if v.rule == "unreadable")


@pytest.mark.parametrize(
    "tail",
    [
        'S = "void f() {}"\next = load_inline("e", cpp_sources=textwrap.dedent(S).strip(), functions=["f"])\n',
        'S = "void f() {}"\next = load_inline("e", [S, "// x"], functions=["f"])\n',
        'S = "void f() {{}} // {}"\next = load_inline("e", S.format(N), functions=["f"])\n',
        'S = "void f() {}"\next = load_inline("e", "\\n".join([S, S]), functions=["f"])\n',
        'ext = load_inline("e", f"void f() {{ int n = {N}; }}", functions=["f"])\n',
        'ext = load_inline("e", "void f() { int n = %d; }" % N, functions=["f"])\n',
    ],
)
def test_honest_load_inline_sources_resolve(tail: str) -> None:
    assert check_python(_INLINE_HEAD + tail, "solution.py", RuleConfig(flavour="cpu")) == []


def test_resolved_sources_are_still_checked_as_cpp() -> None:
    src = _INLINE_HEAD + 'S = "void f(at::Tensor x) { x.relu_(); }"\next = load_inline("e", textwrap.dedent(S))\n'
    assert {v.rule for v in check_python(src, "solution.py", RuleConfig(flavour="cpu"))} == {"torch-compute"}
