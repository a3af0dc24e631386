// Softmax over long rows: one block per row; each thread keeps an online (max, sum), the block merges them.
#include <cuda_runtime.h>
#include <cstdint>
#include <cfloat>

constexpr int kThreads = 1024;

__device__ __forceinline__ void merge(float& m, float& s, float om, float os) {
    const float nm = fmaxf(m, om);
    s = (m == -FLT_MAX ? 0.f : s * expf(m - nm)) + (om == -FLT_MAX ? 0.f : os * expf(om - nm));
    m = nm;
}

__global__ void __launch_bounds__(kThreads) block_softmax(const float* __restrict__ x, float* __restrict__ y,
                                                          int64_t cols) {
    __shared__ float sm[32], ss[32];
    const float* xr = x + blockIdx.x * cols;
    float* yr = y + blockIdx.x * cols;
    float m = -FLT_MAX, s = 0.f;
    const bool vec = (cols % 4 == 0) && (reinterpret_cast<uintptr_t>(xr) % 16 == 0);
    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (int64_t c = threadIdx.x; c < cols / 4; c += kThreads) {
            const float4 v = x4[c];
            const float vm = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
            merge(m, s, vm, expf(v.x - vm) + expf(v.y - vm) + expf(v.z - vm) + expf(v.w - vm));
        }
    } else {
        for (int64_t c = threadIdx.x; c < cols; c += kThreads) merge(m, s, xr[c], 1.f);
    }
    for (int off = 16; off > 0; off >>= 1) {
        const float om = __shfl_xor_sync(0xffffffffu, m, off);
        const float os = __shfl_xor_sync(0xffffffffu, s, off);
        merge(m, s, om, os);
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) { sm[warp] = m; ss[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        m = lane < kThreads / 32 ? sm[lane] : -FLT_MAX;
        s = lane < kThreads / 32 ? ss[lane] : 0.f;
        for (int off = 16; off > 0; off >>= 1) {
            const float om = __shfl_xor_sync(0xffffffffu, m, off);
            const float os = __shfl_xor_sync(0xffffffffu, s, off);
            merge(m, s, om, os);
        }
        if (lane == 0) { sm[0] = m; ss[0] = s; }
    }
    __syncthreads();
    m = sm[0];
    const float inv = 1.f / ss[0];
    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        float4* y4 = reinterpret_cast<float4*>(yr);
        for (int64_t c = threadIdx.x; c < cols / 4; c += kThreads) {
            float4 v = x4[c];
            v.x = expf(v.x - m) * inv; v.y = expf(v.y - m) * inv;
            v.z = expf(v.z - m) * inv; v.w = expf(v.w - m) * inv;
            y4[c] = v;
        }
    } else {
        for (int64_t c = threadIdx.x; c < cols; c += kThreads) yr[c] = expf(xr[c] - m) * inv;
    }
}

cudaError_t block_softmax_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows == 0) return cudaSuccess;
    block_softmax<<<(unsigned)rows, kThreads, 0, stream>>>(x, y, cols);
    return cudaGetLastError();
}
