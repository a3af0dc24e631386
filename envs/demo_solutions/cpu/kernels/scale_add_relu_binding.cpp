// Python binding of the fused scale + add + ReLU kernel (allocation and checks only, no torch compute).
#include <torch/extension.h>

#include "../binding_registry.h"

void scale_add_relu_cpu(const float* x, const float* residual, float* y, int64_t n, float scale);

static torch::Tensor scale_add_relu(torch::Tensor x, torch::Tensor residual, double scale) {
    TORCH_CHECK(x.device().is_cpu() && residual.device().is_cpu(), "expected CPU tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && residual.scalar_type() == torch::kFloat32, "expected float32");
    TORCH_CHECK(x.sizes() == residual.sizes(), "x and residual must have the same shape");
    TORCH_CHECK(x.is_contiguous() && residual.is_contiguous(), "expected contiguous tensors");
    torch::Tensor y = torch::empty_like(x);
    scale_add_relu_cpu(x.data_ptr<float>(), residual.data_ptr<float>(), y.data_ptr<float>(), x.numel(),
                       static_cast<float>(scale));
    return y;
}

static void bind(pybind11::module_& m) {
    m.def("scale_add_relu", &scale_add_relu, "y = relu(x * scale + residual)");
}

REGISTER_BINDING(scale_add_relu, bind);
