#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include "binding_registry.h"

cudaError_t row_softmax_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);

static torch::Tensor row_softmax(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.is_contiguous() && x.scalar_type() == torch::kFloat32,
                "x must be a contiguous 2-D float32 CUDA tensor");
    auto y = torch::empty_like(x);
    cudaError_t err = row_softmax_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1),
                                         at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "row_softmax launch failed: ", cudaGetErrorString(err));
    return y;
}

static void register_row_softmax(pybind11::module_& m) {
    m.def("row_softmax", &row_softmax, "softmax over the last dimension");
}

REGISTER_BINDING(row_softmax, register_row_softmax);
