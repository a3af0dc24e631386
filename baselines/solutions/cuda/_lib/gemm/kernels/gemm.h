// The fused GEMM epilogue shared by the GEMM solutions: y = act((acc + bias - sub) * mul) * post
// + res_coef * (acc + bias) + residual.
#pragma once

enum Activation : int { ACT_NONE = 0, ACT_RELU = 1, ACT_LEAKY_RELU = 2, ACT_GELU = 3, ACT_SIGMOID = 4, ACT_SWISH = 5 };

struct Epilogue {
    int act;
    float sub;
    float mul;
    float post;
    float res_coef;
    float slope;
};
