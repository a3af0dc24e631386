// FAULT FIXTURE: writes far outside the output: an illegal memory access (sticky CUDA error).
#include <cstdint>
#include <cuda_runtime.h>

__global__ void scribble(float* y, int64_t n) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) {
        y[i + (int64_t(1) << 40)] = 1.0f;
    }
}

cudaError_t scale_add_relu_launch(const float* x, const float* r, float* y, int64_t n, float scale,
                                  cudaStream_t stream) {
    scribble<<<(n + 255) / 256, 256, 0, stream>>>(y, n);
    return cudaGetLastError();
}
