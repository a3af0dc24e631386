// Binding of the cuBLAS GEMM with a fused epilogue: checks and allocation only.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>

#include "../binding_registry.h"
#include "gemm.h"

cublasStatus_t gemm_epilogue_run(cublasHandle_t handle, cudaStream_t stream, const float* a, const float* b,
                                 bool b_is_weight, const float* bias, const float* residual, float* y, int m, int n,
                                 int k, Epilogue e);

static void check(const torch::Tensor& t, const char* what) {
    TORCH_CHECK(t.is_cuda() && t.scalar_type() == torch::kFloat32 && t.is_contiguous(), what,
                ": expected a contiguous float32 CUDA tensor");
}

// a: (..., k); b: (n, k) when b_is_weight (nn.Linear's layout) else (k, n). Returns (..., n).
static torch::Tensor gemm(torch::Tensor a, torch::Tensor b, bool b_is_weight, c10::optional<torch::Tensor> bias,
                          c10::optional<torch::Tensor> residual, int64_t act, double sub, double mul, double post,
                          double res_coef, double slope) {
    check(a, "gemm a");
    check(b, "gemm b");
    TORCH_CHECK(a.dim() >= 1 && b.dim() == 2, "gemm: a must have a last dimension and b must be 2-D");
    const int64_t k = a.size(-1), m = a.numel() / k;
    const int64_t n = b_is_weight ? b.size(0) : b.size(1);
    TORCH_CHECK((b_is_weight ? b.size(1) : b.size(0)) == k, "gemm: inner dimensions differ");
    std::vector<int64_t> shape(a.sizes().begin(), a.sizes().end());
    shape.back() = n;
    torch::Tensor y = torch::empty(shape, a.options());
    const float* bp = nullptr;
    const float* rp = nullptr;
    if (bias.has_value()) {
        check(*bias, "gemm bias");
        TORCH_CHECK(bias->numel() == n, "gemm: bias must have n elements");
        bp = bias->data_ptr<float>();
    }
    if (residual.has_value()) {
        check(*residual, "gemm residual");
        TORCH_CHECK(residual->numel() == m * n, "gemm: residual must have the output's shape");
        rp = residual->data_ptr<float>();
    }
    const Epilogue e{static_cast<int>(act), static_cast<float>(sub), static_cast<float>(mul), static_cast<float>(post),
                     static_cast<float>(res_coef), static_cast<float>(slope)};
    const cublasStatus_t st = gemm_epilogue_run(at::cuda::getCurrentCUDABlasHandle(), at::cuda::getCurrentCUDAStream(),
                                                a.data_ptr<float>(), b.data_ptr<float>(), b_is_weight, bp, rp,
                                                y.data_ptr<float>(), static_cast<int>(m), static_cast<int>(n),
                                                static_cast<int>(k), e);
    TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "gemm failed with cuBLAS status ", static_cast<int>(st));
    return y;
}

cublasStatus_t attention_scores_run(cublasHandle_t handle, cudaStream_t stream, const float* qkv, float* scores, int b,
                                    int t, int h, int d, float alpha);
cublasStatus_t attention_values_run(cublasHandle_t handle, cudaStream_t stream, const float* probs, const float* qkv,
                                    float* y, int b, int t, int h, int d);

// qkv: (b, t, 3c) with c = heads * d. Returns the scores (b, heads, t, t) = q k^T * alpha.
static torch::Tensor attention_scores(torch::Tensor qkv, int64_t heads, double alpha) {
    check(qkv, "attention qkv");
    TORCH_CHECK(qkv.dim() == 3 && qkv.size(2) % (3 * heads) == 0, "attention: qkv must be (b, t, 3 * heads * d)");
    const int64_t b = qkv.size(0), t = qkv.size(1), d = qkv.size(2) / (3 * heads);
    torch::Tensor s = torch::empty({b, heads, t, t}, qkv.options());
    const cublasStatus_t st = attention_scores_run(at::cuda::getCurrentCUDABlasHandle(), at::cuda::getCurrentCUDAStream(),
                                                   qkv.data_ptr<float>(), s.data_ptr<float>(), b, t, heads, d,
                                                   static_cast<float>(alpha));
    TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "attention scores failed with cuBLAS status ", static_cast<int>(st));
    return s;
}

// probs: (b, heads, t, t); returns y (b, t, heads * d) with y[:, :, h*d:(h+1)*d] = probs[:, h] @ v_h.
static torch::Tensor attention_values(torch::Tensor probs, torch::Tensor qkv) {
    check(probs, "attention probs");
    check(qkv, "attention qkv");
    const int64_t b = probs.size(0), heads = probs.size(1), t = probs.size(2);
    TORCH_CHECK(qkv.dim() == 3 && qkv.size(0) == b && qkv.size(1) == t && qkv.size(2) % (3 * heads) == 0,
                "attention: qkv does not match probs");
    const int64_t d = qkv.size(2) / (3 * heads);
    torch::Tensor y = torch::empty({b, t, heads * d}, qkv.options());
    const cublasStatus_t st = attention_values_run(at::cuda::getCurrentCUDABlasHandle(), at::cuda::getCurrentCUDAStream(),
                                                   probs.data_ptr<float>(), qkv.data_ptr<float>(), y.data_ptr<float>(),
                                                   b, t, heads, d);
    TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "attention values failed with cuBLAS status ", static_cast<int>(st));
    return y;
}

static void bind(pybind11::module_& m) {
    m.def("attention_scores", &attention_scores, "q k^T * alpha per head of a packed (b, t, 3c) qkv");
    m.def("attention_values", &attention_values, "probs @ v per head, heads packed back into (b, t, c)");
    m.def("gemm", &gemm, "y = act((a @ op(b) + bias - sub) * mul) * post + res_coef * (a @ op(b) + bias) + residual",
          pybind11::arg("a"), pybind11::arg("b"), pybind11::arg("b_is_weight"), pybind11::arg("bias"),
          pybind11::arg("residual"), pybind11::arg("act") = 0, pybind11::arg("sub") = 0.0, pybind11::arg("mul") = 1.0,
          pybind11::arg("post") = 1.0, pybind11::arg("res_coef") = 0.0, pybind11::arg("slope") = 0.0);
}

REGISTER_BINDING(gemm, bind);
