// Single-pass C++ kernels of the builtin tasks that are one fused memory pass: bias + GELU, SwiGLU,
// x + z^T (blocked), masked mean pooling and GroupNorm + SiLU; OpenMP over rows.
#include <cmath>
#include <cstdint>

static inline float silu(float v) { return v / (1.0f + std::exp(-v)); }

void bias_gelu_cpu(const float* x, const float* bias, float* y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < cols; ++j) {
            const float v = x[r * cols + j] + bias[j];
            y[r * cols + j] = 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        }
    }
}

void swiglu_cpu(const float* x, float* y, int64_t rows, int64_t half) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * 2 * half;
        for (int64_t j = 0; j < half; ++j) y[r * half + j] = silu(xr[j]) * xr[half + j];
    }
}

void transpose_add_cpu(const float* x, const float* z, float* y, int64_t n) {
    const int64_t tile = 32;  // blocks of z read row by row, written column by column, stay in cache
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t bi = 0; bi < n; bi += tile) {
        for (int64_t bj = 0; bj < n; bj += tile) {
            for (int64_t i = bi; i < bi + tile && i < n; ++i) {
                for (int64_t j = bj; j < bj + tile && j < n; ++j) y[i * n + j] = x[i * n + j] + z[j * n + i];
            }
        }
    }
}

// Rows whose weight is 0 add nothing and are not read.
void masked_mean_cpu(const float* x, const float* m, float* y, int64_t batch, int64_t seq, int64_t hidden,
                     float out_scale) {
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < batch; ++b) {
        float* yb = y + b * hidden;
        for (int64_t j = 0; j < hidden; ++j) yb[j] = 0.0f;
        float count = 0.0f;
        for (int64_t t = 0; t < seq; ++t) {
            const float w = m[b * seq + t];
            count += w;
            if (w == 0.0f) continue;
            const float* xt = x + (b * seq + t) * hidden;
            for (int64_t j = 0; j < hidden; ++j) yb[j] += w * xt[j];
        }
        const float k = out_scale / (count > 1.0f ? count : 1.0f);
        for (int64_t j = 0; j < hidden; ++j) yb[j] *= k;
    }
}

void groupnorm_silu_cpu(const float* x, const float* w, const float* b, float* y, int64_t n, int64_t channels,
                        int64_t groups, int64_t hw, float eps) {
    const int64_t per_group = channels / groups, count = per_group * hw;
#pragma omp parallel for schedule(static)
    for (int64_t ng = 0; ng < n * groups; ++ng) {
        const float* xg = x + ng * count;
        float* yg = y + ng * count;
        const int64_t g = ng % groups;
        double s = 0.0;
        for (int64_t i = 0; i < count; ++i) s += xg[i];
        const float mean = static_cast<float>(s / count);
        double q = 0.0;
        for (int64_t i = 0; i < count; ++i) q += double(xg[i] - mean) * (xg[i] - mean);
        const float rstd = 1.0f / std::sqrt(static_cast<float>(q / count) + eps);
        for (int64_t i = 0; i < count; ++i) {
            const int64_t c = g * per_group + i / hw;
            yg[i] = silu((xg[i] - mean) * rstd * w[c] + b[c]);
        }
    }
}
