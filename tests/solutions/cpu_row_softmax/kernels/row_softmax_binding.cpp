#include <torch/extension.h>
#include "binding_registry.h"

void row_softmax_cpu(const float* x, float* y, int64_t rows, int64_t cols);

static torch::Tensor row_softmax(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && x.scalar_type() == torch::kFloat32,
                "x must be a contiguous 2-D float32 tensor");
    auto y = torch::empty_like(x);
    row_softmax_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1));
    return y;
}

static void register_row_softmax(pybind11::module_& m) {
    m.def("row_softmax", &row_softmax, "softmax over the last dimension");
}

REGISTER_BINDING(row_softmax, register_row_softmax);
