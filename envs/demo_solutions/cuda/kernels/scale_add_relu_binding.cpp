// Python binding of the fused scale + add + ReLU CUDA kernel (allocation and checks only).
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

#include "../binding_registry.h"

cudaError_t scale_add_relu_launch(const float* x, const float* r, float* y, int64_t n, float scale,
                                  cudaStream_t stream);

static torch::Tensor scale_add_relu(torch::Tensor x, torch::Tensor residual, double scale) {
    TORCH_CHECK(x.is_cuda() && residual.is_cuda(), "expected CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && residual.scalar_type() == torch::kFloat32, "expected float32");
    TORCH_CHECK(x.sizes() == residual.sizes(), "x and residual must have the same shape");
    TORCH_CHECK(x.is_contiguous() && residual.is_contiguous(), "expected contiguous tensors");
    // float4 loads need 16-byte aligned pointers: fresh allocations are 256-byte aligned.
    TORCH_CHECK(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0 &&
                reinterpret_cast<uintptr_t>(residual.data_ptr()) % 16 == 0, "expected 16-byte aligned tensors");
    torch::Tensor y = torch::empty_like(x);
    const cudaError_t err = scale_add_relu_launch(x.data_ptr<float>(), residual.data_ptr<float>(),
                                                  y.data_ptr<float>(), x.numel(), static_cast<float>(scale),
                                                  at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "scale_add_relu launch failed: ", cudaGetErrorString(err));
    return y;
}

static void bind(pybind11::module_& m) {
    m.def("scale_add_relu", &scale_add_relu, "y = relu(x * scale + residual)");
}

REGISTER_BINDING(scale_add_relu, bind);
