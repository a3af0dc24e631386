// relu(x * scale): one pass, float4 loads where the buffer allows, grid-stride loop.
#include <cuda_runtime.h>
#include <cstdint>

__global__ void scale_relu_vec4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4, float s) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        float4 v = x[i];
        v.x = fmaxf(v.x * s, 0.f);
        v.y = fmaxf(v.y * s, 0.f);
        v.z = fmaxf(v.z * s, 0.f);
        v.w = fmaxf(v.w * s, 0.f);
        y[i] = v;
    }
}

__global__ void scale_relu_tail(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n, float s) {
    int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i] * s, 0.f);
}

cudaError_t scale_relu_launch(const float* x, float* y, int64_t n, float s, cudaStream_t stream) {
    const int threads = 256;
    const bool aligned = (reinterpret_cast<uintptr_t>(x) % 16 == 0) && (reinterpret_cast<uintptr_t>(y) % 16 == 0);
    int64_t n4 = aligned ? n / 4 : 0;
    if (n4 > 0) {
        int64_t blocks = (n4 + threads - 1) / threads;
        if (blocks > 65535 * 8) blocks = 65535 * 8;
        scale_relu_vec4<<<(unsigned)blocks, threads, 0, stream>>>(reinterpret_cast<const float4*>(x),
                                                                 reinterpret_cast<float4*>(y), n4, s);
    }
    int64_t rest = n - n4 * 4;
    if (rest > 0) {
        scale_relu_tail<<<(unsigned)((rest + threads - 1) / threads), threads, 0, stream>>>(x, y, n4 * 4, n, s);
    }
    return cudaGetLastError();
}
