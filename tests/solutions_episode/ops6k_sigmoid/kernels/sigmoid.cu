// Elementwise sigmoid in one pass: float4 loads when aligned, scalar tail.
#include <cuda_runtime.h>
#include <cstdint>

__device__ __forceinline__ float sigmoid_f(float v) { return 1.0f / (1.0f + expf(-v)); }

__global__ void sigmoid_vec4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        float4 v = x[i];
        v.x = sigmoid_f(v.x);
        v.y = sigmoid_f(v.y);
        v.z = sigmoid_f(v.z);
        v.w = sigmoid_f(v.w);
        y[i] = v;
    }
}

__global__ void sigmoid_tail(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n) {
    int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = sigmoid_f(x[i]);
}

cudaError_t sigmoid_launch(const float* x, float* y, int64_t n, cudaStream_t stream) {
    const int threads = 256;
    const bool aligned = (reinterpret_cast<uintptr_t>(x) % 16 == 0) && (reinterpret_cast<uintptr_t>(y) % 16 == 0);
    const int64_t n4 = aligned ? n / 4 : 0;
    if (n4 > 0) {
        int64_t blocks = (n4 + threads - 1) / threads;
        if (blocks > 132 * 64) blocks = 132 * 64;
        sigmoid_vec4<<<(unsigned)blocks, threads, 0, stream>>>(reinterpret_cast<const float4*>(x),
                                                               reinterpret_cast<float4*>(y), n4);
    }
    const int64_t rest = n - n4 * 4;
    if (rest > 0) {
        sigmoid_tail<<<(unsigned)((rest + threads - 1) / threads), threads, 0, stream>>>(x, y, n4 * 4, n);
    }
    return cudaGetLastError();
}
