// Shapes and epilogue of the cuDNN convolution solutions.
#pragma once
#include <cstddef>

struct ConvShape {
    int n, c, h, w;  // input
    int k, r, s;     // filters: out channels, kernel height and width
    int pad;         // same padding on both sides, stride 1, no dilation
    int out_h() const { return h + 2 * pad - r + 1; }
    int out_w() const { return w + 2 * pad - s + 1; }
};

struct ConvEpilogue {
    const float* conv_bias;  // per channel, or null
    const float* bn_weight;  // inference batch norm (all four or none)
    const float* bn_bias;
    const float* bn_mean;
    const float* bn_var;
    float bn_eps;
    bool relu;
    const float* post_bias;  // per channel, added after the activation, or null
};
