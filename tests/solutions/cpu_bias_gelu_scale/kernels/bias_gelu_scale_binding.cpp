#include <torch/extension.h>
#include "binding_registry.h"

void bias_gelu_scale_cpu(const float* x, const float* bias, float* y, int64_t rows, int64_t cols, float scale);

static torch::Tensor bias_gelu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
    TORCH_CHECK(x.is_contiguous() && bias.is_contiguous(), "inputs must be contiguous");
    TORCH_CHECK(bias.numel() == x.size(-1), "bias must match the last dimension");
    auto y = torch::empty_like(x);
    const int64_t cols = x.size(-1);
    bias_gelu_scale_cpu(x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), x.numel() / cols, cols,
                        static_cast<float>(scale));
    return y;
}

static void register_bias_gelu_scale(pybind11::module_& m) {
    m.def("bias_gelu_scale", &bias_gelu_scale, "gelu(x + bias) * scale");
}

REGISTER_BINDING(bias_gelu_scale, register_bias_gelu_scale);
