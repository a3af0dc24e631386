// y = diag(d) @ x without the N x N matrix: y[i, :] = d[i] * x[i, :], one read and one write of x.
// The GEMM that eager PyTorch runs does 2 N^2 M FLOPs for N M useful multiplications.
#include <cstdint>
#include <cuda_runtime.h>

// Rows in grid.y (strided beyond 65535), columns in float4 chunks over grid.x: no division per element.
__global__ void diag_scale_vec4(const float* __restrict__ d, const float4* __restrict__ x, float4* __restrict__ y,
                                int64_t rows, int64_t cols4) {
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float k = d[r];
        const float4* xr = x + r * cols4;
        float4* yr = y + r * cols4;
        for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < cols4; j += (int64_t)gridDim.x * blockDim.x) {
            float4 v = xr[j];
            v.x *= k;
            v.y *= k;
            v.z *= k;
            v.w *= k;
            yr[j] = v;
        }
    }
}

__global__ void diag_scale_scalar(const float* __restrict__ d, const float* __restrict__ x, float* __restrict__ y,
                                  int64_t rows, int64_t cols) {
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float k = d[r];
        for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < cols; j += (int64_t)gridDim.x * blockDim.x) {
            y[r * cols + j] = k * x[r * cols + j];
        }
    }
}

cudaError_t diag_scale_launch(const float* d, const float* x, float* y, int64_t rows, int64_t cols,
                              cudaStream_t stream) {
    if (rows == 0 || cols == 0) return cudaSuccess;
    const int threads = 256;
    const bool vec = cols % 4 == 0;  // rows then start on 16-byte boundaries (x itself is 16-byte aligned)
    const int64_t per_row = vec ? cols / 4 : cols;
    // About four waves of blocks in all: each block streams a long contiguous stretch of its row.
    int64_t blocks_x = (per_row + threads * 8 - 1) / (threads * 8);
    if (blocks_x < 1) blocks_x = 1;
    if (blocks_x > 1024) blocks_x = 1024;
    const unsigned grid_y = static_cast<unsigned>(rows < 65535 ? rows : 65535);
    const dim3 grid(static_cast<unsigned>(blocks_x), grid_y);
    if (vec) {
        diag_scale_vec4<<<grid, threads, 0, stream>>>(d, reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y),
                                                      rows, per_row);
    } else {
        diag_scale_scalar<<<grid, threads, 0, stream>>>(d, x, y, rows, cols);
    }
    return cudaGetLastError();
}
