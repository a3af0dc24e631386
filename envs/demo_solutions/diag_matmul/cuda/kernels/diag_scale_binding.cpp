// Binding of the row-scaling kernel: checks and allocation only.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

#include "../binding_registry.h"

cudaError_t diag_scale_launch(const float* d, const float* x, float* y, int64_t rows, int64_t cols,
                              cudaStream_t stream);

static torch::Tensor diag_scale(torch::Tensor d, torch::Tensor x) {
    TORCH_CHECK(d.is_cuda() && x.is_cuda(), "diag_scale: expected CUDA tensors");
    TORCH_CHECK(d.scalar_type() == torch::kFloat32 && x.scalar_type() == torch::kFloat32, "diag_scale: expected float32");
    TORCH_CHECK(d.dim() == 1 && x.dim() == 2 && d.size(0) == x.size(0), "diag_scale: d is (N,) and x is (N, M)");
    TORCH_CHECK(d.is_contiguous() && x.is_contiguous(), "diag_scale: expected contiguous tensors");
    TORCH_CHECK(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0, "diag_scale: expected a 16-byte aligned x");
    torch::Tensor y = torch::empty_like(x);
    const cudaError_t err = diag_scale_launch(d.data_ptr<float>(), x.data_ptr<float>(), y.data_ptr<float>(), x.size(0),
                                              x.size(1), at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "diag_scale launch failed: ", cudaGetErrorString(err));
    return y;
}

static void bind(pybind11::module_& m) {
    m.def("diag_scale", &diag_scale, "diag(d) @ x as a row scaling: y[i, :] = d[i] * x[i, :]");
}

REGISTER_BINDING(diag_scale, bind);
