"""Static rules (cuda_gym.judge.rules) on real sources and the ATen audit (cuda_gym.judge.audit) on real ops."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from cuda_gym.judge.audit import OpAudit
from cuda_gym.judge.rules import RULES, RuleConfig, check_cpp, check_python, check_submission, strip_cpp

from adversarial.judging import honest_solutions, materialize, solution_meta
from adversarial.manifest import MANIFEST, Case

SOLUTIONS = honest_solutions()


def py_rules(code: str, flavour: str = "cuda") -> set[str]:
    return {v.rule for v in check_python(textwrap.dedent(code), "model_new.py", RuleConfig(flavour=flavour))}


def cpp_rules(code: str, flavour: str = "cuda", device: bool = True) -> set[str]:
    return {v.rule for v in check_cpp(textwrap.dedent(code), "k.cu", RuleConfig(flavour=flavour), device_code=device)}


# -- the adversarial suite and the honest solutions ----------------------------------------------

@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in MANIFEST])
def test_adversarial_static(case: Case, tmp_path: Path) -> None:
    found = check_submission(materialize(case.path, tmp_path), case.flavour)
    assert {v.rule for v in found} == set(case.static)
    assert all(v.file and v.line for v in found), found


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in SOLUTIONS])
def test_honest_solutions_clean(path: Path, tmp_path: Path) -> None:
    flavour = solution_meta(path)["flavour"]
    assert check_submission(materialize(path, tmp_path), flavour) == []


def test_every_rule_is_documented() -> None:
    doc = (Path(__file__).parent.parent / "docs" / "rules.md").read_text()
    for rule in [*RULES, "input-mutation", "infra-tamper", "suspect-speedup"]:
        assert f"`{rule}`" in doc, rule


# -- python ------------------------------------------------------------------------------------

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
        ("import subprocess", "thread"),
        ("os.system('true')", "thread"),
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


# -- C++ ----------------------------------------------------------------------------------------

def test_strip_cpp_keeps_lines() -> None:
    src = 'int a; // at::matmul\n/* x.relu()\n */ const char* s = "torch::mm(";\nauto r = R"(at::bmm)";\n'
    nc, code = strip_cpp(src)
    assert nc.count("\n") == code.count("\n") == src.count("\n")
    assert "matmul" not in code and "relu" not in code and "torch::mm" not in code and "bmm" not in code
    assert 'torch::mm(' in nc


@pytest.mark.parametrize(
    "snippet, rule",
    [
        ("auto y = at::matmul(a, b);", "torch-compute"),
        ("auto y = torch::conv2d(a, b);", "torch-compute"),
        ("auto y = a.relu();", "torch-compute"),
        ("auto y = at::native::add(a, b);", "torch-compute"),
        ("cublasSaxpy(h, n, &one, x, 1, y, 1);", "library-compute"),
        ("cudnnSoftmaxForward(h, a, b, c, d, e, f, g);", "library-compute"),
        ("cudaStream_t s; cudaStreamCreate(&s);", "stream"),
        ("auto s = at::cuda::getStreamFromPool();", "stream"),
        ("cudaGraphLaunch(g, 0);", "stream"),
        ("cudaLaunchHostFunc(0, fn, nullptr);", "stream"),
        ("std::thread t(fn); t.detach();", "thread"),
        ("auto f = std::async(fn);", "thread"),
        ("pthread_create(&t, nullptr, fn, nullptr);", "thread"),
        ("system(\"ls\");", "thread"),
        ("void* h = dlopen(\"libx.so\", 0);", "introspection"),
        ("FILE* f = fopen(\"x\", \"r\");", "io"),
        ("const char* v = getenv(\"X\");", "io"),
        ("static float* last = nullptr;", "memoisation"),
        ("static std::unordered_map<void*, int> cache;", "memoisation"),
        ("__half h = __float2half(v);", "precision"),
        ("cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH);", "precision"),
        ("asm(\"nop\");", "introspection"),
        ("auto c = x.cpu();", "host-compute"),
    ],
)
def test_cpp_rule(snippet: str, rule: str) -> None:
    assert rule in cpp_rules(f"void host_fn() {{\n    {snippet}\n}}\n")


def test_cpp_file_level_rules(tmp_path: Path) -> None:
    assert "include" in cpp_rules('#include "../../etc/passwd.h"\n')
    assert "include" in cpp_rules('#include "/work/main/model.py"\n')
    assert "precision" in cpp_rules("#pragma GCC optimize(\"fast-math\")\n")
    assert "thread" in cpp_rules("#pragma omp parallel for\nvoid f() {}\n", flavour="cuda")
    assert cpp_rules("#pragma omp parallel for simd\nvoid f() {}\n", flavour="cpu", device=False) == set()
    assert "library-compute" in cpp_rules("void f() { cublasSgemm(h, a, b); }\n", flavour="cpu", device=False)
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    (ws / "binding_registry.h").write_text("#pragma once\n")
    (ws / "model.py").write_text("x = 1\n")
    (ws / "model_new.py").write_text("import cuda_extension\n")
    (ws / "kernels" / "a.cu").write_text('#include "../binding_registry.h"\n#include "../model.py"\n')
    found = check_submission(ws)
    assert [(v.rule, v.line) for v in found] == [("include", 2)]


def test_cpp_allowed_patterns() -> None:
    code = """
    #include <torch/extension.h>
    #include <ATen/cuda/CUDAContext.h>
    #include <cublas_v2.h>
    #include <cudnn.h>
    #include <cuda_fp16.h>
    __device__ __forceinline__ float ld(const float* p) {
        float v;
        asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(p));
        return v;
    }
    __global__ void k(const float* x, float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = fmaxf(ld(x + i), 0.f) + __expf(x[i]) + std::numeric_limits<float>::max();
    }
    static cublasHandle_t handle_cache;
    torch::Tensor run(torch::Tensor a, torch::Tensor b) {
        TORCH_CHECK(a.is_cuda() && a.is_contiguous(), "bad input");
        auto c = torch::empty({a.size(0), b.size(1)}, a.options().dtype(torch::kFloat32));
        auto v = c.view({-1}).narrow(0, 0, 4).transpose(0, 0);
        cublasSgemm(at::cuda::getCurrentCUDABlasHandle(), CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, nullptr,
                    nullptr, 1, nullptr, 1, nullptr, nullptr, 1);
        cudnnConvolutionForward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                CUDNN_CONVOLUTION_FWD_ALGO_GEMM, nullptr, 0, nullptr, nullptr, nullptr);
        k<<<1, 1, 0, at::cuda::getCurrentCUDAStream()>>>(a.data_ptr<float>(), c.data_ptr<float>(), a.numel());
        return c;
    }
    """
    assert cpp_rules(code) == set()


# -- the ATen audit ----------------------------------------------------------------------------

def test_audit_allows_allocation_views_and_copies() -> None:
    x = torch.randn(8, 6)
    with OpAudit() as audit:
        y = torch.empty_like(x)
        z = x.t().contiguous().view(-1)[2:5]
        w = torch.zeros(3).fill_(1.0)
        y.copy_(x)
        x.unsqueeze(0).expand(2, 8, 6).permute(2, 1, 0)
    assert audit.violations() == []
    assert audit.ops  # the ops were seen
    assert z.shape == (3,) and w.shape == (3,)


def test_audit_flags_compute_and_downcasts() -> None:
    x = torch.randn(8, 6)
    with OpAudit() as audit:
        _ = x @ x.t()
        _ = torch.nn.functional.gelu(x)
        _ = x.half()
    found = {(v.rule, v.message.split(" ran ")[1].split(" ")[0]) for v in audit.violations()}
    assert ("torch-compute", "aten::mm") in found
    assert ("torch-compute", "aten::gelu") in found
    assert ("precision", "aten::_to_copy") in found


@pytest.fixture(scope="session")
def audit_extension(tmp_path_factory: pytest.TempPathFactory):
    """A real CPU extension: one pure pointer loop and one function that calls ATen from C++."""
    from torch.utils.cpp_extension import load_inline

    source = """
    #include <torch/extension.h>
    torch::Tensor own_relu(torch::Tensor x) {
        auto y = torch::empty_like(x);
        const float* p = x.data_ptr<float>();
        float* q = y.data_ptr<float>();
        for (int64_t i = 0; i < x.numel(); ++i) q[i] = p[i] > 0.f ? p[i] : 0.f;
        return y;
    }
    torch::Tensor aten_relu(torch::Tensor x) { return at::relu(x); }
    """
    return load_inline(name="cuda_gym_audit_test", cpp_sources=source, functions=["own_relu", "aten_relu"],
                       build_directory=str(tmp_path_factory.mktemp("audit_ext")), verbose=False)


@pytest.mark.slow
def test_audit_with_real_extension(audit_extension) -> None:
    x = torch.randn(64)
    with OpAudit() as honest:
        y = audit_extension.own_relu(x)
    assert torch.equal(y, torch.relu(x))
    assert honest.violations() == []
    assert any(op.startswith("aten::empty") for op in honest.ops)  # C++ allocation is seen
    with OpAudit() as hack:
        audit_extension.aten_relu(x)
    assert [v.rule for v in hack.violations()] == ["torch-compute"]
    assert "aten::relu" in hack.violations()[0].message
