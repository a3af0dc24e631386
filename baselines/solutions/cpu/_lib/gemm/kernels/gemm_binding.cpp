// Bindings of the C++ GEMM with a fused epilogue and of the attention head products: checks and allocation only.
#include <torch/extension.h>

#include "../binding_registry.h"
#include "gemm.h"

void gemm_epilogue_cpu(const float* a, const float* b, bool b_is_weight, const float* bias, const float* residual,
                       float* y, int64_t m, int64_t n, int64_t k, Epilogue e);
void attention_scores_cpu(const float* qkv, float* scores, int64_t b, int64_t t, int64_t heads, int64_t d, float alpha);
void attention_values_cpu(const float* probs, const float* qkv, float* y, int64_t b, int64_t t, int64_t heads,
                          int64_t d);

static void check(const torch::Tensor& t, const char* what) {
    TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == torch::kFloat32 && t.is_contiguous(), what,
                ": expected a contiguous float32 CPU tensor");
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
    gemm_epilogue_cpu(a.data_ptr<float>(), b.data_ptr<float>(), b_is_weight, bp, rp, y.data_ptr<float>(), m, n, k, e);
    return y;
}

static torch::Tensor attention_scores(torch::Tensor qkv, int64_t heads, double alpha) {
    check(qkv, "attention qkv");
    TORCH_CHECK(qkv.dim() == 3 && qkv.size(2) % (3 * heads) == 0, "attention: qkv must be (b, t, 3 * heads * d)");
    const int64_t b = qkv.size(0), t = qkv.size(1), d = qkv.size(2) / (3 * heads);
    torch::Tensor s = torch::empty({b, heads, t, t}, qkv.options());
    attention_scores_cpu(qkv.data_ptr<float>(), s.data_ptr<float>(), b, t, heads, d, static_cast<float>(alpha));
    return s;
}

static torch::Tensor attention_values(torch::Tensor probs, torch::Tensor qkv) {
    check(probs, "attention probs");
    check(qkv, "attention qkv");
    const int64_t b = probs.size(0), heads = probs.size(1), t = probs.size(2);
    TORCH_CHECK(qkv.dim() == 3 && qkv.size(0) == b && qkv.size(1) == t && qkv.size(2) % (3 * heads) == 0,
                "attention: qkv does not match probs");
    const int64_t d = qkv.size(2) / (3 * heads);
    torch::Tensor y = torch::empty({b, t, heads * d}, qkv.options());
    attention_values_cpu(probs.data_ptr<float>(), qkv.data_ptr<float>(), y.data_ptr<float>(), b, t, heads, d);
    return y;
}

static void bind(pybind11::module_& m) {
    m.def("gemm", &gemm, "y = act((a @ op(b) + bias - sub) * mul) * post + res_coef * (a @ op(b) + bias) + residual",
          pybind11::arg("a"), pybind11::arg("b"), pybind11::arg("b_is_weight"), pybind11::arg("bias"),
          pybind11::arg("residual"), pybind11::arg("act") = 0, pybind11::arg("sub") = 0.0, pybind11::arg("mul") = 1.0,
          pybind11::arg("post") = 1.0, pybind11::arg("res_coef") = 0.0, pybind11::arg("slope") = 0.0);
    m.def("attention_scores", &attention_scores, "q k^T * alpha per head of a packed (b, t, 3c) qkv");
    m.def("attention_values", &attention_values, "probs @ v per head, heads packed back into (b, t, c)");
}

REGISTER_BINDING(gemm, bind);
