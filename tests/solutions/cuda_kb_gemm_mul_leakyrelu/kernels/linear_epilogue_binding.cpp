#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>
#include "binding_registry.h"

cublasStatus_t linear_leaky(cublasHandle_t handle, cudaStream_t stream, const float* x, const float* w,
                            const float* b, float* y, int m, int n, int k, float mult, float slope);

static torch::Tensor linear_mul_leaky(torch::Tensor x, torch::Tensor w, torch::Tensor b, double mult, double slope) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && w.is_contiguous() && b.is_contiguous(),
                "inputs must be contiguous CUDA tensors");
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && b.numel() == w.size(0), "shape mismatch");
    auto y = torch::empty({x.size(0), w.size(0)}, x.options());
    cublasStatus_t st = linear_leaky(at::cuda::getCurrentCUDABlasHandle(), at::cuda::getCurrentCUDAStream(),
                                     x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(),
                                     x.size(0), w.size(0), x.size(1), static_cast<float>(mult), static_cast<float>(slope));
    TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "linear_leaky failed with status ", static_cast<int>(st));
    return y;
}

static void register_linear(pybind11::module_& m) {
    m.def("linear_mul_leaky", &linear_mul_leaky, "leaky_relu((x @ w^T + b) * mult)");
}

REGISTER_BINDING(linear_mul_leaky, register_linear);
