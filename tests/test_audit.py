"""The ATen audit (cuda_gym.judge.audit) on real ops and a real extension."""

from __future__ import annotations

import pytest
import torch

from cuda_gym.judge.audit import OpAudit


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
