// Row kernels over a contiguous float32 [rows, cols] matrix, rows split across OpenMP threads: softmax
// (optionally log, causal), normalisations (LayerNorm, RMSNorm, L2), reductions (sum, max), inclusive scan.
#include <cfloat>
#include <cmath>
#include <cstdint>

void softmax_rows_cpu(const float* x, float* y, int64_t rows, int64_t cols, float inv_temp, float out_scale,
                      bool log_mode, bool causal) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        const int64_t valid = causal ? (r % cols) + 1 : cols;
        float m = -FLT_MAX;
        for (int64_t j = 0; j < valid; ++j) m = std::fmax(m, xr[j] * inv_temp);
        float s = 0.0f;
        for (int64_t j = 0; j < valid; ++j) s += std::exp(xr[j] * inv_temp - m);
        const float inv_sum = 1.0f / s, log_sum = std::log(s);
        for (int64_t j = 0; j < cols; ++j) {
            if (j >= valid) {
                yr[j] = 0.0f;
            } else {
                const float v = xr[j] * inv_temp - m;
                yr[j] = log_mode ? (v - log_sum) * out_scale : std::exp(v) * inv_sum * out_scale;
            }
        }
    }
}

// mode 0: LayerNorm; 1: RMSNorm x * rsqrt(mean(x^2) + eps); 2: L2, x / max(||x||, eps). w, b may be null.
void norm_rows_cpu(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols, int mode,
                   float eps) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float mean = 0.0f, scale;
        if (mode == 0) {
            double s = 0.0;
            for (int64_t j = 0; j < cols; ++j) s += xr[j];
            mean = static_cast<float>(s / cols);
            double q = 0.0;
            for (int64_t j = 0; j < cols; ++j) q += double(xr[j] - mean) * (xr[j] - mean);
            scale = 1.0f / std::sqrt(static_cast<float>(q / cols) + eps);
        } else {
            double q = 0.0;
            for (int64_t j = 0; j < cols; ++j) q += double(xr[j]) * xr[j];
            scale = mode == 1 ? 1.0f / std::sqrt(static_cast<float>(q / cols) + eps)
                              : 1.0f / std::fmax(static_cast<float>(std::sqrt(q)), eps);
        }
        for (int64_t j = 0; j < cols; ++j) {
            float v = (xr[j] - mean) * scale;
            if (w != nullptr) v *= w[j];
            if (b != nullptr) v += b[j];
            yr[j] = v;
        }
    }
}

// op 0: row sum; op 1: max of x * s[row] (s may be null).
void reduce_rows_cpu(const float* x, const float* s, float* y, int64_t rows, int64_t cols, int op) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        if (op == 0) {
            double acc = 0.0;
            for (int64_t j = 0; j < cols; ++j) acc += xr[j];
            y[r] = static_cast<float>(acc);
        } else {
            const float k = s != nullptr ? s[r] : 1.0f;
            float acc = -FLT_MAX;
            for (int64_t j = 0; j < cols; ++j) acc = std::fmax(acc, xr[j] * k);
            y[r] = acc;
        }
    }
}

void cumsum_rows_cpu(const float* x, float* y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        double acc = 0.0;  // a double carry: the running sum of a long row keeps its low bits
        for (int64_t j = 0; j < cols; ++j) {
            acc += x[r * cols + j];
            y[r * cols + j] = static_cast<float>(acc);
        }
    }
}
