#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include "binding_registry.h"

cudaError_t block_softmax_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);

static torch::Tensor block_softmax(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.is_contiguous() && x.scalar_type() == torch::kFloat32,
                "x must be a contiguous 2-D float32 CUDA tensor");
    auto y = torch::empty_like(x);
    cudaError_t err = block_softmax_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1),
                                           at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "block_softmax launch failed: ", cudaGetErrorString(err));
    return y;
}

static void register_block_softmax(pybind11::module_& m) {
    m.def("block_softmax", &block_softmax, "softmax over long rows");
}

REGISTER_BINDING(block_softmax, register_block_softmax);
