// Binding of the row-scaling kernel: checks and allocation only, no torch compute.
#include <torch/extension.h>

#include "../binding_registry.h"

void diag_scale_cpu(const float* d, const float* x, float* y, int64_t rows, int64_t cols);

static torch::Tensor diag_scale(torch::Tensor d, torch::Tensor x) {
    TORCH_CHECK(d.device().is_cpu() && x.device().is_cpu(), "diag_scale: expected CPU tensors");
    TORCH_CHECK(d.scalar_type() == torch::kFloat32 && x.scalar_type() == torch::kFloat32, "diag_scale: expected float32");
    TORCH_CHECK(d.dim() == 1 && x.dim() == 2 && d.size(0) == x.size(0), "diag_scale: d is (N,) and x is (N, M)");
    TORCH_CHECK(d.is_contiguous() && x.is_contiguous(), "diag_scale: expected contiguous tensors");
    torch::Tensor y = torch::empty_like(x);
    diag_scale_cpu(d.data_ptr<float>(), x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1));
    return y;
}

static void bind(pybind11::module_& m) {
    m.def("diag_scale", &diag_scale, "diag(d) @ x as a row scaling: y[i, :] = d[i] * x[i, :]");
}

REGISTER_BINDING(diag_scale, bind);
