#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include "binding_registry.h"

cudaError_t scale_relu_launch(const float* x, float* y, int64_t n, float s, cudaStream_t stream);

static torch::Tensor scale_relu(torch::Tensor x, double scale) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32,
                "x must be a contiguous float32 CUDA tensor");
    auto y = torch::empty_like(x);
    cudaError_t err = scale_relu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(),
                                        static_cast<float>(scale), at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "scale_relu launch failed: ", cudaGetErrorString(err));
    return y;
}

static void register_scale_relu(pybind11::module_& m) {
    m.def("scale_relu", &scale_relu, "relu(x * scale)");
}

REGISTER_BINDING(scale_relu, register_scale_relu);
