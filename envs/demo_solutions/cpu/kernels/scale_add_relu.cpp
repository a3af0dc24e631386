// y = max(x * scale + residual, 0) in one pass over memory, split across OpenMP threads.
#include <cstdint>

void scale_add_relu_cpu(const float* x, const float* residual, float* y, int64_t n, float scale) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i] * scale + residual[i];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}
