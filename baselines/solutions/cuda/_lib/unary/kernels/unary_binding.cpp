// Binding of the elementwise activation kernels: checks and allocation only.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

#include "../binding_registry.h"

cudaError_t unary_launch(int op, const float* x, float* y, int64_t n, float a, float b, cudaStream_t stream);

static torch::Tensor unary(torch::Tensor x, int64_t op, double a, double b) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "unary: expected a float32 CUDA tensor");
    TORCH_CHECK(x.is_contiguous(), "unary: expected a contiguous tensor");
    TORCH_CHECK(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0, "unary: expected a 16-byte aligned tensor");
    torch::Tensor y = torch::empty_like(x);
    const cudaError_t err = unary_launch(static_cast<int>(op), x.data_ptr<float>(), y.data_ptr<float>(), x.numel(),
                                         static_cast<float>(a), static_cast<float>(b),
                                         at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "unary launch failed: ", cudaGetErrorString(err));
    return y;
}

static void bind(pybind11::module_& m) {
    m.def("unary", &unary, "y = f(x) for the activation numbered op, with parameters a and b");
}

REGISTER_BINDING(unary, bind);
