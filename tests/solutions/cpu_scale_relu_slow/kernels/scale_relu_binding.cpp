#include <torch/extension.h>
#include "binding_registry.h"

void scale_relu_cpu(const float* x, float* y, int64_t n, float scale);

static torch::Tensor scale_relu(torch::Tensor x, double scale) {
    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32, "x must be contiguous float32");
    auto y = torch::empty_like(x);
    scale_relu_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), static_cast<float>(scale));
    return y;
}

static void register_scale_relu(pybind11::module_& m) {
    m.def("scale_relu", &scale_relu, "relu(x * scale)");
}

REGISTER_BINDING(scale_relu, register_scale_relu);
