// Binding of the cuDNN convolution with a fused epilogue: checks, allocation and the cuDNN handle only.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cudnn.h>

#include "../binding_registry.h"
#include "conv.h"

const char* conv_workspace_bytes(cudnnHandle_t handle, const ConvShape& s, size_t* bytes);
const char* conv_forward(cudnnHandle_t handle, cudaStream_t stream, const ConvShape& s, const float* x, const float* w,
                         float* y, void* workspace, size_t workspace_bytes);
cudaError_t conv_epilogue(cudaStream_t stream, const float* y, float* out, const ConvEpilogue& e, int n, int channels,
                          int h, int w, int pool);

static cudnnHandle_t cudnn_handle() {
    // One cuDNN handle per process, as PyTorch keeps one: creating one costs milliseconds.
    static cudnnHandle_t handle = [] {
        cudnnHandle_t h = nullptr;
        TORCH_CHECK(cudnnCreate(&h) == CUDNN_STATUS_SUCCESS, "cudnnCreate failed");
        return h;
    }();
    return handle;
}

static const float* ptr(const c10::optional<torch::Tensor>& t, int64_t numel, const char* what) {
    if (!t.has_value()) return nullptr;
    TORCH_CHECK(t->is_cuda() && t->scalar_type() == torch::kFloat32 && t->is_contiguous() && t->numel() == numel,
                what, ": expected a contiguous float32 CUDA tensor of ", numel, " elements");
    return t->data_ptr<float>();
}

// y = pool(post_bias + relu(bn(conv(x, w, pad) + conv_bias))) with every stage optional.
static torch::Tensor conv2d(torch::Tensor x, torch::Tensor w, int64_t pad, c10::optional<torch::Tensor> conv_bias,
                            c10::optional<torch::Tensor> bn_weight, c10::optional<torch::Tensor> bn_bias,
                            c10::optional<torch::Tensor> bn_mean, c10::optional<torch::Tensor> bn_var, double bn_eps,
                            bool relu, c10::optional<torch::Tensor> post_bias, int64_t pool) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.is_contiguous() && x.dim() == 4,
                "conv2d: x must be a contiguous float32 NCHW CUDA tensor");
    TORCH_CHECK(w.is_cuda() && w.scalar_type() == torch::kFloat32 && w.is_contiguous() && w.dim() == 4 &&
                w.size(1) == x.size(1), "conv2d: w must be a contiguous float32 (K, C, R, S) CUDA tensor");
    TORCH_CHECK(pool >= 1, "conv2d: pool must be >= 1");
    const ConvShape s{static_cast<int>(x.size(0)), static_cast<int>(x.size(1)), static_cast<int>(x.size(2)),
                      static_cast<int>(x.size(3)), static_cast<int>(w.size(0)), static_cast<int>(w.size(2)),
                      static_cast<int>(w.size(3)), static_cast<int>(pad)};
    const int64_t k = s.k;
    const ConvEpilogue e{ptr(conv_bias, k, "conv bias"), ptr(bn_weight, k, "bn weight"), ptr(bn_bias, k, "bn bias"),
                         ptr(bn_mean, k, "bn mean"), ptr(bn_var, k, "bn var"), static_cast<float>(bn_eps), relu,
                         ptr(post_bias, k, "post bias")};
    TORCH_CHECK((e.bn_weight && e.bn_bias && e.bn_mean && e.bn_var) || !(e.bn_weight || e.bn_bias || e.bn_mean || e.bn_var),
                "conv2d: give all four batch-norm tensors or none");
    cudnnHandle_t handle = cudnn_handle();
    size_t bytes = 0;
    const char* err = conv_workspace_bytes(handle, s, &bytes);
    TORCH_CHECK(err == nullptr, "cuDNN: ", err ? err : "");
    torch::Tensor workspace = torch::empty({static_cast<int64_t>(bytes) + 1}, x.options().dtype(torch::kUInt8));
    torch::Tensor y = torch::empty({s.n, k, s.out_h(), s.out_w()}, x.options());
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    err = conv_forward(handle, stream, s, x.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(),
                       workspace.data_ptr(), bytes);
    TORCH_CHECK(err == nullptr, "cuDNN: ", err ? err : "");
    torch::Tensor out = torch::empty({s.n, k, s.out_h() / pool, s.out_w() / pool}, x.options());
    const cudaError_t cerr = conv_epilogue(stream, y.data_ptr<float>(), out.data_ptr<float>(), e, s.n, s.k, s.out_h(),
                                           s.out_w(), static_cast<int>(pool));
    TORCH_CHECK(cerr == cudaSuccess, "conv epilogue launch failed: ", cudaGetErrorString(cerr));
    return out;
}

static void bind(pybind11::module_& m) {
    m.def("conv2d", &conv2d, "pool(post_bias + relu(bn(conv2d(x, w) + conv_bias))), each stage optional",
          pybind11::arg("x"), pybind11::arg("w"), pybind11::arg("pad"), pybind11::arg("conv_bias"),
          pybind11::arg("bn_weight"), pybind11::arg("bn_bias"), pybind11::arg("bn_mean"), pybind11::arg("bn_var"),
          pybind11::arg("bn_eps"), pybind11::arg("relu"), pybind11::arg("post_bias"), pybind11::arg("pool"));
}

REGISTER_BINDING(conv2d, bind);
