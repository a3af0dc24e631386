// Softmax over rows: one warp per row, online max/sum in registers, then one write pass.
#include <cuda_runtime.h>
#include <cstdint>
#include <cfloat>

__global__ void row_softmax_warp(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols) {
    const int lane = threadIdx.x & 31;
    const int64_t row = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) return;
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    float m = -FLT_MAX, s = 0.f;
    for (int64_t c = lane; c < cols; c += 32) {
        const float v = xr[c];
        const float nm = fmaxf(m, v);
        s = s * expf(m - nm) + expf(v - nm);
        m = nm;
    }
    for (int off = 16; off > 0; off >>= 1) {
        const float om = __shfl_xor_sync(0xffffffffu, m, off);
        const float os = __shfl_xor_sync(0xffffffffu, s, off);
        const float nm = fmaxf(m, om);
        s = s * expf(m - nm) + os * expf(om - nm);
        m = nm;
    }
    const float inv = 1.f / s;
    for (int64_t c = lane; c < cols; c += 32) yr[c] = expf(xr[c] - m) * inv;
}

cudaError_t row_softmax_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
    const int warps = 8;
    const int64_t blocks = (rows + warps - 1) / warps;
    if (blocks == 0) return cudaSuccess;
    row_softmax_warp<<<(unsigned)blocks, warps * 32, 0, stream>>>(x, y, rows, cols);
    return cudaGetLastError();
}
