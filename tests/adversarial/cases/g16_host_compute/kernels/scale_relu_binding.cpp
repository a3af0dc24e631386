#include <torch/extension.h>
#include "binding_registry.h"

void scale_relu_host(const float* x, float* y, int64_t n, float scale);

static torch::Tensor scale_relu(torch::Tensor x, double scale) {
    auto xh = x.cpu();
    auto yh = torch::empty_like(xh);
    scale_relu_host(xh.data_ptr<float>(), yh.data_ptr<float>(), xh.numel(), static_cast<float>(scale));
    return yh.to(x.device());
}

static void register_scale_relu(pybind11::module_& m) {
    m.def("scale_relu", &scale_relu, "relu(x * scale) on the host");
}

REGISTER_BINDING(scale_relu, register_scale_relu);
