// y = max(x * scale + residual, 0): one memory pass, float4 loads where the size allows.
#include <cstdint>
#include <cuda_runtime.h>

__global__ void scale_add_relu_vec4(const float4* __restrict__ x, const float4* __restrict__ r,
                                    float4* __restrict__ y, int64_t n4, float scale) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        const float4 a = x[i];
        const float4 b = r[i];
        float4 o;
        o.x = fmaxf(fmaf(a.x, scale, b.x), 0.0f);
        o.y = fmaxf(fmaf(a.y, scale, b.y), 0.0f);
        o.z = fmaxf(fmaf(a.z, scale, b.z), 0.0f);
        o.w = fmaxf(fmaf(a.w, scale, b.w), 0.0f);
        y[i] = o;
    }
}

__global__ void scale_add_relu_tail(const float* __restrict__ x, const float* __restrict__ r,
                                    float* __restrict__ y, int64_t start, int64_t n, float scale) {
    const int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = fmaxf(fmaf(x[i], scale, r[i]), 0.0f);
    }
}

cudaError_t scale_add_relu_launch(const float* x, const float* r, float* y, int64_t n, float scale,
                                  cudaStream_t stream) {
    const int threads = 256;
    const int64_t n4 = n / 4;
    if (n4 > 0) {
        const int64_t blocks = (n4 + threads - 1) / threads;
        const int grid = static_cast<int>(blocks < 65535 * 8 ? blocks : 65535 * 8);
        scale_add_relu_vec4<<<grid, threads, 0, stream>>>(reinterpret_cast<const float4*>(x),
                                                          reinterpret_cast<const float4*>(r),
                                                          reinterpret_cast<float4*>(y), n4, scale);
    }
    const int64_t tail = n - n4 * 4;
    if (tail > 0) {
        scale_add_relu_tail<<<1, threads, 0, stream>>>(x, r, y, n4 * 4, n, scale);
    }
    return cudaGetLastError();
}
