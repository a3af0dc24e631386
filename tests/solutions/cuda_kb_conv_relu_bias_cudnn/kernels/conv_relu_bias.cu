// y = relu(conv2d(x, w) + conv_bias[c]) + bias[c]: cuDNN convolution (FMA math, no TF32), then one fused pass.
#include <cuda_runtime.h>
#include <cudnn.h>
#include <cstddef>
#include <cstdint>

namespace {

struct ConvDescs {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;

    ~ConvDescs() {
        if (x) cudnnDestroyTensorDescriptor(x);
        if (y) cudnnDestroyTensorDescriptor(y);
        if (w) cudnnDestroyFilterDescriptor(w);
        if (conv) cudnnDestroyConvolutionDescriptor(conv);
    }
};

cudnnStatus_t describe(ConvDescs& d, cudnnHandle_t handle, int n, int c, int h, int wd, int k, int r, int s) {
    cudnnStatus_t st;
    if ((st = cudnnCreateTensorDescriptor(&d.x)) != CUDNN_STATUS_SUCCESS) return st;
    if ((st = cudnnCreateTensorDescriptor(&d.y)) != CUDNN_STATUS_SUCCESS) return st;
    if ((st = cudnnCreateFilterDescriptor(&d.w)) != CUDNN_STATUS_SUCCESS) return st;
    if ((st = cudnnCreateConvolutionDescriptor(&d.conv)) != CUDNN_STATUS_SUCCESS) return st;
    if ((st = cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, wd)) != CUDNN_STATUS_SUCCESS)
        return st;
    if ((st = cudnnSetFilter4dDescriptor(d.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c, r, s)) != CUDNN_STATUS_SUCCESS)
        return st;
    if ((st = cudnnSetConvolution2dDescriptor(d.conv, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT)) !=
        CUDNN_STATUS_SUCCESS)
        return st;
    if ((st = cudnnSetConvolutionMathType(d.conv, CUDNN_FMA_MATH)) != CUDNN_STATUS_SUCCESS) return st;
    if ((st = cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, k, h - r + 1, wd - s + 1)) !=
        CUDNN_STATUS_SUCCESS)
        return st;
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    int found = 0;
    st = cudnnGetConvolutionForwardAlgorithm_v7(handle, d.x, d.w, d.conv, d.y, 8, &found, perf);
    if (st == CUDNN_STATUS_SUCCESS) {
        for (int i = 0; i < found; ++i) {
            if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType == CUDNN_FMA_MATH) {
                d.algo = perf[i].algo;
                break;
            }
        }
    }
    return CUDNN_STATUS_SUCCESS;
}

__global__ void bias_relu_bias(float* __restrict__ y, const float* __restrict__ cb, const float* __restrict__ b,
                               int64_t n, int64_t hw, int channels) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int c = static_cast<int>((i / hw) % channels);
        y[i] = fmaxf(y[i] + cb[c], 0.f) + b[c];
    }
}

}  // namespace

// Workspace bytes the convolution needs for these shapes (call before conv_relu_bias_run).
size_t conv_relu_bias_workspace(cudnnHandle_t handle, int n, int c, int h, int w, int k, int r, int s) {
    ConvDescs d;
    if (describe(d, handle, n, c, h, w, k, r, s) != CUDNN_STATUS_SUCCESS) return 0;
    size_t bytes = 0;
    cudnnGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, d.conv, d.y, d.algo, &bytes);
    return bytes;
}

const char* conv_relu_bias_run(cudnnHandle_t handle, cudaStream_t stream, const float* x, const float* w,
                               const float* conv_bias, const float* bias, float* y, void* workspace,
                               size_t workspace_bytes, int n, int c, int h, int wd, int k, int r, int s) {
    ConvDescs d;
    cudnnStatus_t st = cudnnSetStream(handle, stream);
    if (st == CUDNN_STATUS_SUCCESS) st = describe(d, handle, n, c, h, wd, k, r, s);
    size_t need = 0;
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, d.conv, d.y, d.algo, &need);
    if (st == CUDNN_STATUS_SUCCESS && need > workspace_bytes) return "workspace too small";
    const float one = 1.f, zero = 0.f;
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnConvolutionForward(handle, &one, d.x, x, d.w, w, d.conv, d.algo, workspace, workspace_bytes, &zero, d.y, y);
    if (st != CUDNN_STATUS_SUCCESS) return cudnnGetErrorString(st);
    const int64_t hw = static_cast<int64_t>(h - r + 1) * (wd - s + 1);
    const int64_t total = static_cast<int64_t>(n) * k * hw;
    int64_t blocks = (total + 255) / 256;
    if (blocks > 65535 * 8) blocks = 65535 * 8;
    bias_relu_bias<<<(unsigned)blocks, 256, 0, stream>>>(y, conv_bias, bias, total, hw, k);
    cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}
