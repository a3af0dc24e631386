#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cudnn.h>
#include "binding_registry.h"

size_t conv_relu_bias_workspace(cudnnHandle_t handle, int n, int c, int h, int w, int k, int r, int s);
const char* conv_relu_bias_run(cudnnHandle_t handle, cudaStream_t stream, const float* x, const float* w,
                               const float* conv_bias, const float* bias, float* y, void* workspace,
                               size_t workspace_bytes, int n, int c, int h, int wd, int k, int r, int s);

namespace {

cudnnHandle_t cudnn_handle() {
    // one handle per process: creating a cuDNN handle costs milliseconds
    static cudnnHandle_t handle = [] {
        cudnnHandle_t h = nullptr;
        TORCH_CHECK(cudnnCreate(&h) == CUDNN_STATUS_SUCCESS, "cudnnCreate failed");
        return h;
    }();
    return handle;
}

torch::Tensor conv_relu_bias(torch::Tensor x, torch::Tensor w, torch::Tensor conv_bias, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 4 && w.dim() == 4 && x.size(1) == w.size(1), "x (N,C,H,W), w (K,C,R,S)");
    TORCH_CHECK(x.is_contiguous() && w.is_contiguous() && conv_bias.is_contiguous() && bias.is_contiguous(),
                "inputs must be contiguous");
    const int n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
    const int k = w.size(0), r = w.size(2), s = w.size(3);
    auto y = torch::empty({n, k, h - r + 1, wd - s + 1}, x.options());
    cudnnHandle_t handle = cudnn_handle();
    const size_t bytes = conv_relu_bias_workspace(handle, n, c, h, wd, k, r, s);
    auto workspace = torch::empty({static_cast<int64_t>(bytes) + 1}, x.options().dtype(torch::kUInt8));
    const char* error = conv_relu_bias_run(handle, at::cuda::getCurrentCUDAStream(), x.data_ptr<float>(),
                                           w.data_ptr<float>(), conv_bias.data_ptr<float>(), bias.data_ptr<float>(),
                                           y.data_ptr<float>(), workspace.data_ptr(), bytes, n, c, h, wd, k, r, s);
    TORCH_CHECK(error == nullptr, "conv_relu_bias failed: ", error ? error : "");
    return y;
}

void register_conv(pybind11::module_& m) {
    m.def("conv_relu_bias", &conv_relu_bias, "relu(conv2d(x, w) + conv_bias) + bias with cuDNN");
}

}  // namespace

REGISTER_BINDING(conv_relu_bias, register_conv);
