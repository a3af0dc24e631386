// y = diag(d) @ x without the N x N matrix: y[i, :] = d[i] * x[i, :], one pass over x.
#include <cstdint>

void diag_scale_cpu(const float* d, const float* x, float* y, int64_t rows, int64_t cols) {
    // Threads only pay off beyond a few MB: below that, waking the pool costs more than the pass.
#pragma omp parallel for schedule(static) if (rows * cols > (int64_t(1) << 22))
    for (int64_t r = 0; r < rows; ++r) {
        const float k = d[r];
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) yr[j] = k * xr[j];
    }
}
