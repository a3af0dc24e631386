#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include "binding_registry.h"

cudaError_t bias_gelu_scale_launch(const float* x, const float* bias, float* y, int64_t n, int64_t cols, float s,
                                   cudaStream_t stream);

static torch::Tensor bias_gelu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && bias.is_contiguous(), "inputs must be contiguous CUDA tensors");
    TORCH_CHECK(bias.numel() == x.size(-1), "bias must match the last dimension");
    auto y = torch::empty_like(x);
    cudaError_t err = bias_gelu_scale_launch(x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(),
                                             x.numel(), x.size(-1), static_cast<float>(scale),
                                             at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "bias_gelu_scale launch failed: ", cudaGetErrorString(err));
    return y;
}

static void register_bias_gelu_scale(pybind11::module_& m) {
    m.def("bias_gelu_scale", &bias_gelu_scale, "gelu(x + bias) * scale");
}

REGISTER_BINDING(bias_gelu_scale, register_bias_gelu_scale);
