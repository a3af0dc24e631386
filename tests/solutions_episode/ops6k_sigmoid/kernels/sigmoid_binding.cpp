#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include "binding_registry.h"

cudaError_t sigmoid_launch(const float* x, float* y, int64_t n, cudaStream_t stream);

static torch::Tensor sigmoid_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32,
                "x must be a contiguous float32 CUDA tensor");
    auto y = torch::empty_like(x);
    cudaError_t err = sigmoid_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(),
                                     at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "sigmoid launch failed: ", cudaGetErrorString(err));
    return y;
}

static void register_sigmoid(pybind11::module_& m) { m.def("sigmoid_forward", &sigmoid_forward, "sigmoid(x)"); }

REGISTER_BINDING(sigmoid, register_sigmoid);
