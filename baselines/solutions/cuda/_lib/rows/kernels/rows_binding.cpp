// Bindings of the row kernels: a tensor is viewed as [rows, cols] with cols its last dimension.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

#include "../binding_registry.h"

cudaError_t softmax_rows_launch(const float* x, float* y, int64_t rows, int64_t cols, float inv_temp,
                                float out_scale, bool log_mode, bool causal, cudaStream_t stream);
cudaError_t norm_rows_launch(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols,
                             int mode, float eps, cudaStream_t stream);
cudaError_t reduce_rows_launch(const float* x, const float* s, float* y, int64_t rows, int64_t cols, int op,
                               cudaStream_t stream);
cudaError_t cumsum_rows_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);

static void check(const torch::Tensor& x, const char* what) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.is_contiguous(), what,
                ": expected a contiguous float32 CUDA tensor");
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) > 0, what, ": expected a non-empty last dimension");
}

static const float* optional_ptr(const c10::optional<torch::Tensor>& t, int64_t numel, const char* what) {
    if (!t.has_value()) return nullptr;
    check(*t, what);
    TORCH_CHECK(t->numel() == numel, what, ": wrong number of elements");
    return t->data_ptr<float>();
}

static void done(cudaError_t err, const char* what) {
    TORCH_CHECK(err == cudaSuccess, what, " launch failed: ", cudaGetErrorString(err));
}

static torch::Tensor softmax(torch::Tensor x, double inv_temp, double out_scale, bool log_mode, bool causal) {
    check(x, "softmax");
    const int64_t cols = x.size(-1), rows = x.numel() / cols;
    torch::Tensor y = torch::empty_like(x);
    done(softmax_rows_launch(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols, static_cast<float>(inv_temp),
                             static_cast<float>(out_scale), log_mode, causal, at::cuda::getCurrentCUDAStream()),
         "softmax");
    return y;
}

static torch::Tensor norm(torch::Tensor x, c10::optional<torch::Tensor> w, c10::optional<torch::Tensor> b,
                          int64_t mode, double eps) {
    check(x, "norm");
    const int64_t cols = x.size(-1), rows = x.numel() / cols;
    const float* wp = optional_ptr(w, cols, "norm weight");
    const float* bp = optional_ptr(b, cols, "norm bias");
    torch::Tensor y = torch::empty_like(x);
    done(norm_rows_launch(x.data_ptr<float>(), wp, bp, y.data_ptr<float>(), rows, cols, static_cast<int>(mode),
                          static_cast<float>(eps), at::cuda::getCurrentCUDAStream()),
         "norm");
    return y;
}

static torch::Tensor reduce(torch::Tensor x, c10::optional<torch::Tensor> s, int64_t op) {
    check(x, "reduce");
    const int64_t cols = x.size(-1), rows = x.numel() / cols;
    const float* sp = optional_ptr(s, rows, "reduce scale");
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - 1);
    torch::Tensor y = torch::empty(shape, x.options());
    done(reduce_rows_launch(x.data_ptr<float>(), sp, y.data_ptr<float>(), rows, cols, static_cast<int>(op),
                            at::cuda::getCurrentCUDAStream()),
         "reduce");
    return y;
}

static torch::Tensor cumsum(torch::Tensor x) {
    check(x, "cumsum");
    const int64_t cols = x.size(-1), rows = x.numel() / cols;
    torch::Tensor y = torch::empty_like(x);
    done(cumsum_rows_launch(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols, at::cuda::getCurrentCUDAStream()),
         "cumsum");
    return y;
}

static void bind(pybind11::module_& m) {
    m.def("softmax", &softmax, "softmax (or log-softmax) of x * inv_temp over the last dimension, times out_scale");
    m.def("norm", &norm, "row normalisation: mode 0 LayerNorm, 1 RMSNorm, 2 L2 (optional weight and bias)");
    m.def("reduce", &reduce, "row reduction: op 0 sum, op 1 max of x * s[row]");
    m.def("cumsum", &cumsum, "inclusive prefix sum over the last dimension");
}

REGISTER_BINDING(rows, bind);
