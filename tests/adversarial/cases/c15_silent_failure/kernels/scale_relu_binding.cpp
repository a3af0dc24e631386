#include <torch/extension.h>
#include "binding_registry.h"

void scale_relu_cpu(const float* x, float* y, int64_t n, float scale);

static torch::Tensor scale_relu(torch::Tensor x, double scale) {
    auto y = torch::empty_like(x);
    // "launch" that silently does nothing above a size limit, like a kernel over its resource limits
    if (x.numel() <= 1024) {
        scale_relu_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), static_cast<float>(scale));
    }
    return y;
}

static void register_scale_relu(pybind11::module_& m) {
    m.def("scale_relu", &scale_relu, "relu(x * scale)");
}

REGISTER_BINDING(scale_relu, register_scale_relu);
