// Direct 2-D convolution (NCHW, float32, stride 1, same padding on both sides) in plain C++ with the
// per-channel epilogue fused into the output loop: conv bias, inference batch norm, ReLU, post bias, max pool.
#include <cmath>
#include <cstdint>
#include <vector>

#include "conv.h"

void conv2d_cpu(const ConvShape& s, const float* x, const float* w, const ConvEpilogue& e, int pool, float* out) {
    const int oh = s.out_h(), ow = s.out_w(), ph = oh / pool, pw = ow / pool;
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < s.n; ++n) {
        for (int k = 0; k < s.k; ++k) {
            std::vector<float> plane(static_cast<size_t>(oh) * ow, 0.0f);
            for (int c = 0; c < s.c; ++c) {
                const float* xc = x + ((int64_t)n * s.c + c) * s.h * s.w;
                const float* wk = w + ((int64_t)k * s.c + c) * s.r * s.s;
                for (int r = 0; r < s.r; ++r) {
                    for (int q = 0; q < s.s; ++q) {
                        const float wv = wk[r * s.s + q];
                        for (int oy = 0; oy < oh; ++oy) {
                            const int iy = oy + r - s.pad;
                            if (iy < 0 || iy >= s.h) continue;
                            for (int ox = 0; ox < ow; ++ox) {
                                const int ix = ox + q - s.pad;
                                if (ix >= 0 && ix < s.w) plane[(size_t)oy * ow + ox] += wv * xc[(int64_t)iy * s.w + ix];
                            }
                        }
                    }
                }
            }
            float scale = 1.0f, shift = e.conv_bias ? e.conv_bias[k] : 0.0f;
            if (e.bn_weight) {
                scale = e.bn_weight[k] / std::sqrt(e.bn_var[k] + e.bn_eps);
                shift = e.bn_bias[k] + (shift - e.bn_mean[k]) * scale;
            }
            float* o = out + ((int64_t)n * s.k + k) * ph * pw;
            for (int py = 0; py < ph; ++py) {
                for (int px = 0; px < pw; ++px) {
                    float best = -3.402823466e38f;
                    for (int dy = 0; dy < pool; ++dy) {
                        for (int dx = 0; dx < pool; ++dx) {
                            float v = plane[(size_t)(py * pool + dy) * ow + px * pool + dx] * scale + shift;
                            if (e.relu) v = v > 0.0f ? v : 0.0f;
                            best = v > best ? v : best;
                        }
                    }
                    o[py * pw + px] = e.post_bias ? best + e.post_bias[k] : best;
                }
            }
        }
    }
}
