// y = epilogue(a @ op(b)) in plain C++ (no BLAS on the cpu flavour): rows of y split across OpenMP
// threads, the inner loops contiguous so the compiler vectorises them, the epilogue applied per row.
#include <cmath>
#include <cstdint>

#include "gemm.h"

static float activate(float v, int act, float slope) {
    switch (act) {
        case ACT_RELU: return v > 0.0f ? v : 0.0f;
        case ACT_LEAKY_RELU: return v > 0.0f ? v : v * slope;
        case ACT_GELU: return 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
        case ACT_SIGMOID: return 1.0f / (1.0f + std::exp(-v));
        case ACT_SWISH: return v / (1.0f + std::exp(-v));
        default: return v;
    }
}

void gemm_epilogue_cpu(const float* a, const float* b, bool b_is_weight, const float* bias, const float* residual,
                       float* y, int64_t m, int64_t n, int64_t k, Epilogue e) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
        const float* ai = a + i * k;
        float* yi = y + i * n;
        if (b_is_weight) {  // b is (n, k): dot products of contiguous rows
            for (int64_t j = 0; j < n; ++j) {
                const float* bj = b + j * k;
                float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
                for (int64_t p = 0; p < k; ++p) acc += ai[p] * bj[p];
                yi[j] = acc;
            }
        } else {  // b is (k, n): accumulate rows of b
            for (int64_t j = 0; j < n; ++j) yi[j] = 0.0f;
            for (int64_t p = 0; p < k; ++p) {
                const float av = ai[p];
                const float* bp = b + p * n;
#pragma omp simd
                for (int64_t j = 0; j < n; ++j) yi[j] += av * bp[j];
            }
        }
        for (int64_t j = 0; j < n; ++j) {
            float v = yi[j];
            if (bias != nullptr) v += bias[j];
            const float pre = v;
            v = activate((v - e.sub) * e.mul, e.act, e.slope) * e.post;
            if (e.res_coef != 0.0f) v += e.res_coef * pre;
            if (residual != nullptr) v += residual[i * n + j];
            yi[j] = v;
        }
    }
}

// scores[b, h] = q k^T * alpha for head h of a packed (b, t, 3c) qkv (c = heads * d).
void attention_scores_cpu(const float* qkv, float* scores, int64_t b, int64_t t, int64_t heads, int64_t d, float alpha) {
    const int64_t c = heads * d, ld = 3 * c;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < b; ++i) {
        for (int64_t h = 0; h < heads; ++h) {
            const float* base = qkv + i * t * ld;
            float* s = scores + (i * heads + h) * t * t;
            for (int64_t r = 0; r < t; ++r) {
                const float* q = base + r * ld + h * d;
                for (int64_t col = 0; col < t; ++col) {
                    const float* kk = base + col * ld + c + h * d;
                    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
                    for (int64_t p = 0; p < d; ++p) acc += q[p] * kk[p];
                    s[r * t + col] = acc * alpha;
                }
            }
        }
    }
}

// y[b, r, h*d:(h+1)*d] = sum_col probs[b, h, r, col] v[b, col, h]
void attention_values_cpu(const float* probs, const float* qkv, float* y, int64_t b, int64_t t, int64_t heads,
                          int64_t d) {
    const int64_t c = heads * d, ld = 3 * c;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < b; ++i) {
        for (int64_t h = 0; h < heads; ++h) {
            const float* p = probs + (i * heads + h) * t * t;
            for (int64_t r = 0; r < t; ++r) {
                float* out = y + (i * t + r) * c + h * d;
                for (int64_t j = 0; j < d; ++j) out[j] = 0.0f;
                for (int64_t col = 0; col < t; ++col) {
                    const float w = p[r * t + col];
                    const float* v = qkv + (i * t + col) * ld + 2 * c + h * d;
#pragma omp simd
                    for (int64_t j = 0; j < d; ++j) out[j] += w * v[j];
                }
            }
        }
    }
}
