// relu(x * scale) over a contiguous float buffer, OpenMP-parallel and vectorisable.
#include <cstdint>

void scale_relu_cpu(const float* __restrict__ x, float* __restrict__ y, int64_t n, float scale) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i] * scale;
        y[i] = v > 0.f ? v : 0.f;
    }
}
