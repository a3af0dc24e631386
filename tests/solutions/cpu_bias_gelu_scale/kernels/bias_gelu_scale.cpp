// gelu(x + bias) * scale with the exact (erf) GELU; bias broadcasts over the last dimension.
#include <cmath>
#include <cstdint>

void bias_gelu_scale_cpu(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ y,
                         int64_t rows, int64_t cols, float scale) {
    const float inv_sqrt2 = 0.70710678118654752f;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
            const float v = x[r * cols + c] + bias[c];
            y[r * cols + c] = 0.5f * v * (1.f + std::erf(v * inv_sqrt2)) * scale;
        }
    }
}
