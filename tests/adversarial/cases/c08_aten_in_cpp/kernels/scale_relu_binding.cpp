#include <torch/extension.h>
#include "binding_registry.h"

static torch::Tensor scale_relu(torch::Tensor x, double scale) {
    return at::relu(x * scale);
}

static void register_scale_relu(pybind11::module_& m) {
    m.def("scale_relu", &scale_relu, "relu(x * scale)");
}

REGISTER_BINDING(scale_relu, register_scale_relu);
