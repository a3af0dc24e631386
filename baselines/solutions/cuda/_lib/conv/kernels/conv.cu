// 2-D convolution (NCHW, float32) with cuDNN in full fp32 (FMA math, no TF32), then one fused pass for
// the per-channel epilogue: conv bias, inference batch norm, ReLU, a bias added after, 2x2 max pooling.
#include <cstdint>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "conv.h"

struct ConvDescs {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;

    ~ConvDescs() {
        if (x) cudnnDestroyTensorDescriptor(x);
        if (y) cudnnDestroyTensorDescriptor(y);
        if (w) cudnnDestroyFilterDescriptor(w);
        if (conv) cudnnDestroyConvolutionDescriptor(conv);
    }
};

#define CUDNN_TRY(expr)                                  \
    do {                                                 \
        const cudnnStatus_t st_ = (expr);                \
        if (st_ != CUDNN_STATUS_SUCCESS) return cudnnGetErrorString(st_); \
    } while (0)

static const char* describe(ConvDescs& d, cudnnHandle_t handle, const ConvShape& s) {
    CUDNN_TRY(cudnnCreateTensorDescriptor(&d.x));
    CUDNN_TRY(cudnnCreateTensorDescriptor(&d.y));
    CUDNN_TRY(cudnnCreateFilterDescriptor(&d.w));
    CUDNN_TRY(cudnnCreateConvolutionDescriptor(&d.conv));
    CUDNN_TRY(cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.c, s.h, s.w));
    CUDNN_TRY(cudnnSetFilter4dDescriptor(d.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.k, s.c, s.r, s.s));
    CUDNN_TRY(cudnnSetConvolution2dDescriptor(d.conv, s.pad, s.pad, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT));
    CUDNN_TRY(cudnnSetConvolutionMathType(d.conv, CUDNN_FMA_MATH));  // fp32 task: no TF32 tensor cores
    CUDNN_TRY(cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.k, s.out_h(), s.out_w()));
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    int found = 0;
    CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(handle, d.x, d.w, d.conv, d.y, 8, &found, perf));
    for (int i = 0; i < found; ++i) {
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType == CUDNN_FMA_MATH) {
            d.algo = perf[i].algo;
            break;
        }
    }
    return nullptr;
}

const char* conv_workspace_bytes(cudnnHandle_t handle, const ConvShape& s, size_t* bytes) {
    ConvDescs d;
    if (const char* err = describe(d, handle, s)) return err;
    CUDNN_TRY(cudnnGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, d.conv, d.y, d.algo, bytes));
    return nullptr;
}

const char* conv_forward(cudnnHandle_t handle, cudaStream_t stream, const ConvShape& s, const float* x, const float* w,
                         float* y, void* workspace, size_t workspace_bytes) {
    ConvDescs d;
    if (const char* err = describe(d, handle, s)) return err;
    CUDNN_TRY(cudnnSetStream(handle, stream));
    const float one = 1.0f, zero = 0.0f;
    CUDNN_TRY(cudnnConvolutionForward(handle, &one, d.x, x, d.w, w, d.conv, d.algo, workspace, workspace_bytes, &zero,
                                      d.y, y));
    return nullptr;
}

// One thread per output element: v = conv (+ bias); batch norm; ReLU; + post bias; max over the pool window.
__global__ void epilogue_kernel(const float* __restrict__ y, float* __restrict__ out, ConvEpilogue e, int64_t total,
                                int channels, int h, int w, int pool) {
    const int oh = h / pool, ow = w / pool;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += stride) {
        const int ox = static_cast<int>(i % ow);
        const int oy = static_cast<int>((i / ow) % oh);
        const int64_t plane = i / ((int64_t)ow * oh);  // n * channels + c
        const int c = static_cast<int>(plane % channels);
        float scale = 1.0f, shift = e.conv_bias ? e.conv_bias[c] : 0.0f;
        if (e.bn_weight) {
            scale = e.bn_weight[c] * rsqrtf(e.bn_var[c] + e.bn_eps);
            shift = e.bn_bias[c] + (shift - e.bn_mean[c]) * scale;
        }
        const float* src = y + plane * h * w;
        float best = -3.402823466e38f;
        for (int dy = 0; dy < pool; ++dy) {
            for (int dx = 0; dx < pool; ++dx) {
                float v = src[(int64_t)(oy * pool + dy) * w + ox * pool + dx] * scale + shift;
                if (e.relu) v = fmaxf(v, 0.0f);
                best = fmaxf(best, v);
            }
        }
        out[i] = e.post_bias ? best + e.post_bias[c] : best;
    }
}

cudaError_t conv_epilogue(cudaStream_t stream, const float* y, float* out, const ConvEpilogue& e, int n, int channels,
                          int h, int w, int pool) {
    const int64_t total = (int64_t)n * channels * (h / pool) * (w / pool);
    int64_t blocks = (total + 255) / 256;
    if (blocks > 132 * 32) blocks = 132 * 32;
    if (total > 0) epilogue_kernel<<<(unsigned)blocks, 256, 0, stream>>>(y, out, e, total, channels, h, w, pool);
    return cudaGetLastError();
}
