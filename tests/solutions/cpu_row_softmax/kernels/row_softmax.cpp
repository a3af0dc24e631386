// Numerically stable softmax over each row of a (rows, cols) float matrix.
#include <cmath>
#include <cstdint>

void row_softmax_cpu(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float m = xr[0];
        for (int64_t c = 1; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        float s = 0.f;
        for (int64_t c = 0; c < cols; ++c) {
            float e = std::exp(xr[c] - m);
            yr[c] = e;
            s += e;
        }
        const float inv = 1.f / s;
        for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
}
