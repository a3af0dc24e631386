// Bindings of the single-pass kernels: checks and allocation only.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

#include "../binding_registry.h"

cudaError_t bias_gelu_launch(const float* x, const float* bias, float* y, int64_t rows, int64_t cols, cudaStream_t s);
cudaError_t swiglu_launch(const float* x, float* y, int64_t rows, int64_t half, cudaStream_t s);
cudaError_t transpose_add_launch(const float* x, const float* z, float* y, int64_t n, cudaStream_t s);
cudaError_t masked_mean_launch(const float* x, const float* m, float* y, int64_t batch, int64_t seq, int64_t hidden,
                               float out_scale, cudaStream_t s);
cudaError_t groupnorm_silu_launch(const float* x, const float* w, const float* b, float* y, int64_t n, int channels,
                                  int groups, int64_t hw, float eps, cudaStream_t s);

static void check(const torch::Tensor& t, const char* what) {
    TORCH_CHECK(t.is_cuda() && t.scalar_type() == torch::kFloat32 && t.is_contiguous(), what,
                ": expected a contiguous float32 CUDA tensor");
}

static void done(cudaError_t err, const char* what) {
    TORCH_CHECK(err == cudaSuccess, what, " launch failed: ", cudaGetErrorString(err));
}

static torch::Tensor bias_gelu(torch::Tensor x, torch::Tensor bias) {
    check(x, "bias_gelu x");
    check(bias, "bias_gelu bias");
    const int64_t cols = x.size(-1);
    TORCH_CHECK(bias.numel() == cols, "bias_gelu: bias must match the last dimension");
    torch::Tensor y = torch::empty_like(x);
    done(bias_gelu_launch(x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), x.numel() / cols, cols,
                          at::cuda::getCurrentCUDAStream()), "bias_gelu");
    return y;
}

static torch::Tensor swiglu(torch::Tensor x) {
    check(x, "swiglu");
    TORCH_CHECK(x.size(-1) % 2 == 0, "swiglu: the last dimension must be even");
    const int64_t half = x.size(-1) / 2;
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = half;
    torch::Tensor y = torch::empty(shape, x.options());
    done(swiglu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel() / x.size(-1), half,
                       at::cuda::getCurrentCUDAStream()), "swiglu");
    return y;
}

static torch::Tensor transpose_add(torch::Tensor x, torch::Tensor z) {
    check(x, "transpose_add x");
    check(z, "transpose_add z");
    TORCH_CHECK(x.dim() == 2 && x.size(0) == x.size(1) && z.sizes() == x.sizes(), "transpose_add: square matrices");
    torch::Tensor y = torch::empty_like(x);
    done(transpose_add_launch(x.data_ptr<float>(), z.data_ptr<float>(), y.data_ptr<float>(), x.size(0),
                              at::cuda::getCurrentCUDAStream()), "transpose_add");
    return y;
}

static torch::Tensor masked_mean(torch::Tensor x, torch::Tensor mask, double out_scale) {
    check(x, "masked_mean x");
    check(mask, "masked_mean mask");
    TORCH_CHECK(x.dim() == 3 && mask.dim() == 2 && mask.size(0) == x.size(0) && mask.size(1) == x.size(1),
                "masked_mean: x is (b, t, h) and mask (b, t)");
    torch::Tensor y = torch::empty({x.size(0), x.size(2)}, x.options());
    done(masked_mean_launch(x.data_ptr<float>(), mask.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1),
                            x.size(2), static_cast<float>(out_scale), at::cuda::getCurrentCUDAStream()), "masked_mean");
    return y;
}

static torch::Tensor groupnorm_silu(torch::Tensor x, torch::Tensor w, torch::Tensor b, int64_t groups, double eps) {
    check(x, "groupnorm x");
    check(w, "groupnorm weight");
    check(b, "groupnorm bias");
    TORCH_CHECK(x.dim() >= 2 && x.size(1) % groups == 0 && w.numel() == x.size(1) && b.numel() == x.size(1),
                "groupnorm: channels must split into groups and match the affine parameters");
    const int64_t hw = x.numel() / (x.size(0) * x.size(1));
    torch::Tensor y = torch::empty_like(x);
    done(groupnorm_silu_launch(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(),
                               x.size(0), static_cast<int>(x.size(1)), static_cast<int>(groups), hw,
                               static_cast<float>(eps), at::cuda::getCurrentCUDAStream()), "groupnorm_silu");
    return y;
}

static void bind(pybind11::module_& m) {
    m.def("bias_gelu", &bias_gelu, "gelu_tanh(x + bias)");
    m.def("swiglu", &swiglu, "silu(x[..., :H]) * x[..., H:]");
    m.def("transpose_add", &transpose_add, "x + z^T for square matrices");
    m.def("masked_mean", &masked_mean, "masked mean over the sequence, times out_scale");
    m.def("groupnorm_silu", &groupnorm_silu, "silu(group_norm(x))");
}

REGISTER_BINDING(fused, bind);
