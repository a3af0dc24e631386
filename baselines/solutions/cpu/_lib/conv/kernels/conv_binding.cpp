// Binding of the C++ convolution with a fused epilogue: checks and allocation only.
#include <torch/extension.h>

#include "../binding_registry.h"
#include "conv.h"

void conv2d_cpu(const ConvShape& s, const float* x, const float* w, const ConvEpilogue& e, int pool, float* out);

static const float* ptr(const c10::optional<torch::Tensor>& t, int64_t numel, const char* what) {
    if (!t.has_value()) return nullptr;
    TORCH_CHECK(t->device().is_cpu() && t->scalar_type() == torch::kFloat32 && t->is_contiguous() &&
                t->numel() == numel, what, ": expected a contiguous float32 CPU tensor of ", numel, " elements");
    return t->data_ptr<float>();
}

// y = pool(post_bias + relu(bn(conv(x, w, pad) + conv_bias))) with every stage optional.
static torch::Tensor conv2d(torch::Tensor x, torch::Tensor w, int64_t pad, c10::optional<torch::Tensor> conv_bias,
                            c10::optional<torch::Tensor> bn_weight, c10::optional<torch::Tensor> bn_bias,
                            c10::optional<torch::Tensor> bn_mean, c10::optional<torch::Tensor> bn_var, double bn_eps,
                            bool relu, c10::optional<torch::Tensor> post_bias, int64_t pool) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32 && x.is_contiguous() && x.dim() == 4,
                "conv2d: x must be a contiguous float32 NCHW CPU tensor");
    TORCH_CHECK(w.device().is_cpu() && w.scalar_type() == torch::kFloat32 && w.is_contiguous() && w.dim() == 4 &&
                w.size(1) == x.size(1), "conv2d: w must be a contiguous float32 (K, C, R, S) CPU tensor");
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
    torch::Tensor out = torch::empty({s.n, k, s.out_h() / pool, s.out_w() / pool}, x.options());
    conv2d_cpu(s, x.data_ptr<float>(), w.data_ptr<float>(), e, static_cast<int>(pool), out.data_ptr<float>());
    return out;
}

static void bind(pybind11::module_& m) {
    m.def("conv2d", &conv2d, "pool(post_bias + relu(bn(conv2d(x, w) + conv_bias))), each stage optional",
          pybind11::arg("x"), pybind11::arg("w"), pybind11::arg("pad"), pybind11::arg("conv_bias"),
          pybind11::arg("bn_weight"), pybind11::arg("bn_bias"), pybind11::arg("bn_mean"), pybind11::arg("bn_var"),
          pybind11::arg("bn_eps"), pybind11::arg("relu"), pybind11::arg("post_bias"), pybind11::arg("pool"));
}

REGISTER_BINDING(conv2d, bind);
