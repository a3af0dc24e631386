"""What a single file's load_inline calls really compile is checked (rules.check_recorded_calls), red team B4."""

from __future__ import annotations

from pathlib import Path

from cuda_gym.build.inline import InlineCall, record_calls
from cuda_gym.judge.rules import check_python, check_recorded_calls

# Red team B4's file (tests/adversarial/singles): the source reaches load_inline through str.replace, so
# the AST pass cannot read it; the C++ runs at::mul + relu_ under a guard that hides them from the audit.
B4 = (Path(__file__).resolve().parent / "adversarial" / "singles" / "computed_inline_source.py").read_text()

HONEST_CPP = """
#include <torch/extension.h>
torch::Tensor scale_relu(torch::Tensor x, double s) {
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    auto y = torch::empty_like(x);
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) { float v = xp[i] * (float)s; yp[i] = v > 0.f ? v : 0.f; }
    return y;
}
"""


def test_the_recorded_sources_of_a_computed_load_inline_are_checked(tmp_path: Path) -> None:
    """The real recorder runs the file in its sandbox; the C++ it recorded is what the build compiles."""
    path = tmp_path / "solution.py"
    path.write_text(B4)
    assert {v.rule for v in check_python(B4, "solution.py")} == {"unreadable"}  # the AST pass cannot read it
    recording = record_calls(path)
    assert recording.error is None and len(recording.calls) == 1, recording.output
    found = check_recorded_calls(recording, "cpu")
    assert {v.rule for v in found} == {"torch-compute", "checker-patch"}
    by_rule = {(v.rule, v.file, v.line) for v in found}
    assert ("torch-compute", "cpp_sources", 7) in by_rule  # at::mul, numbered as the compiler numbers it
    assert ("checker-patch", "cpp_sources", 5) in by_rule  # the ExcludeDispatchKeyGuard line


def test_honest_recorded_calls_pass_and_generated_code_is_checked_too() -> None:
    cpu = InlineCall.from_arguments((), {"name": "e", "cpp_sources": HONEST_CPP, "functions": ["scale_relu"]})
    cuda = InlineCall.from_arguments((), {"name": "e", "cpp_sources": "torch::Tensor f(torch::Tensor x);",
                                          "cuda_sources": "__global__ void k(float* y) { y[0] = 1.f; }\n"
                                                          "torch::Tensor f(torch::Tensor x) { return x; }\n",
                                          "functions": {"f": "doc"}})
    assert check_recorded_calls([cpu, cpu], "cpu") == []
    assert check_recorded_calls([cuda], "cuda") == []
    # functions= is pasted into the generated module definition: a docstring that closes its quote injects code
    sneaky = InlineCall.from_arguments((), {"name": "e", "cpp_sources": HONEST_CPP,
                                            "functions": {"scale_relu": 'x"); PyRun_SimpleString("import os'}})
    assert {v.rule for v in check_recorded_calls([sneaky], "cpu")} == {"unreadable", "native-python"}
