#include <torch/extension.h>
#include "binding_registry.h"

void centered_mean_cpu(const float* x, float* y, int64_t rows, int64_t cols);

static torch::Tensor centered_mean(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "x must be a contiguous 2-D tensor");
    auto y = torch::empty({x.size(0)}, x.options());
    centered_mean_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1));
    return y;
}

static void register_centered_mean(pybind11::module_& m) {
    m.def("centered_mean", &centered_mean, "row mean minus 0.5");
}

REGISTER_BINDING(centered_mean, register_centered_mean);
