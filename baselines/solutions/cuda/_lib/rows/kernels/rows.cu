// Row kernels over a contiguous float32 [rows, cols] matrix, one thread block per row: softmax (optionally
// log, causal), normalisations (LayerNorm, RMSNorm, L2), reductions (sum, max) and an inclusive scan.
#include <cfloat>
#include <cstdint>
#include <cuda_runtime.h>

constexpr int THREADS = 256;
constexpr int WARPS = THREADS / 32;

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum (or max) of one value per thread over the block; every thread gets the result.
template <bool MAX>
__device__ float block_reduce(float v, float* smem) {
    v = MAX ? warp_max(v) : warp_sum(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();  // smem may still be read by a previous reduction
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    v = lane < WARPS ? smem[lane] : (MAX ? -FLT_MAX : 0.0f);
    v = MAX ? warp_max(v) : warp_sum(v);
    return v;
}

// Online softmax: one pass for (max, sum of exp), one pass to write. x is scaled by inv_temp first.
// causal: row r is position r % cols of a square score matrix; columns after it are masked out.
__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int64_t cols, float inv_temp,
                             float out_scale, bool log_mode, bool causal) {
    __shared__ float smem[WARPS];
    const int64_t row = blockIdx.x;
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    const int64_t valid = causal ? (row % cols) + 1 : cols;
    float m = -FLT_MAX, s = 0.0f;
    for (int64_t j = threadIdx.x; j < valid; j += THREADS) {
        const float v = xr[j] * inv_temp;
        if (v > m) {
            s = s * expf(m - v) + 1.0f;
            m = v;
        } else {
            s += expf(v - m);
        }
    }
    const float row_max = block_reduce<true>(m, smem);
    const float row_sum = block_reduce<false>(m == -FLT_MAX ? 0.0f : s * expf(m - row_max), smem);
    const float inv_sum = 1.0f / row_sum;
    const float log_sum = logf(row_sum);
    for (int64_t j = threadIdx.x; j < cols; j += THREADS) {
        if (j >= valid) {
            yr[j] = 0.0f;
        } else {
            const float v = xr[j] * inv_temp - row_max;
            yr[j] = log_mode ? (v - log_sum) * out_scale : expf(v) * inv_sum * out_scale;
        }
    }
}

// mode 0: LayerNorm (w, b); 1: RMSNorm x * rsqrt(mean(x^2) + eps) * w; 2: L2, x / max(||x||, eps) * w.
// w and b may be null (no affine).
__global__ void norm_rows(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                          float* __restrict__ y, int64_t cols, int mode, float eps) {
    __shared__ float smem[WARPS];
    const int64_t row = blockIdx.x;
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    float mean = 0.0f, scale;
    if (mode == 0) {
        float s = 0.0f;
        for (int64_t j = threadIdx.x; j < cols; j += THREADS) s += xr[j];
        mean = block_reduce<false>(s, smem) / (float)cols;
        float q = 0.0f;  // second pass over the (cached) row: exact variance, no cancellation
        for (int64_t j = threadIdx.x; j < cols; j += THREADS) {
            const float d = xr[j] - mean;
            q += d * d;
        }
        scale = rsqrtf(block_reduce<false>(q, smem) / (float)cols + eps);
    } else {
        float q = 0.0f;
        for (int64_t j = threadIdx.x; j < cols; j += THREADS) q += xr[j] * xr[j];
        const float total = block_reduce<false>(q, smem);
        scale = mode == 1 ? rsqrtf(total / (float)cols + eps) : 1.0f / fmaxf(sqrtf(total), eps);
    }
    for (int64_t j = threadIdx.x; j < cols; j += THREADS) {
        float v = (xr[j] - mean) * scale;
        if (w != nullptr) v *= w[j];
        if (b != nullptr) v += b[j];
        yr[j] = v;
    }
}

// op 0: sum of the row; op 1: max of x * s[row] (s may be null: max of x).
__global__ void reduce_rows(const float* __restrict__ x, const float* __restrict__ s, float* __restrict__ y,
                            int64_t cols, int op) {
    __shared__ float smem[WARPS];
    const int64_t row = blockIdx.x;
    const float* xr = x + row * cols;
    if (op == 0) {
        float acc = 0.0f;
        for (int64_t j = threadIdx.x; j < cols; j += THREADS) acc += xr[j];
        acc = block_reduce<false>(acc, smem);
        if (threadIdx.x == 0) y[row] = acc;
    } else {
        const float k = s != nullptr ? s[row] : 1.0f;
        float acc = -FLT_MAX;
        for (int64_t j = threadIdx.x; j < cols; j += THREADS) acc = fmaxf(acc, xr[j] * k);
        acc = block_reduce<true>(acc, smem);
        if (threadIdx.x == 0) y[row] = acc;
    }
}

// Inclusive scan of each row, in tiles of THREADS * 4 elements: each thread scans its 4, the warps scan
// their totals with shuffles, and a carry runs from tile to tile.
__global__ void cumsum_rows(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    __shared__ float warp_totals[WARPS];
    __shared__ float carry_s;
    const int64_t row = blockIdx.x;
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) carry_s = 0.0f;
    __syncthreads();
    for (int64_t base = 0; base < cols; base += THREADS * 4) {
        float v[4];
        const int64_t j0 = base + threadIdx.x * 4;
        float local = 0.0f;
        for (int k = 0; k < 4; ++k) {
            local += (j0 + k < cols) ? xr[j0 + k] : 0.0f;
            v[k] = local;
        }
        float incl = local;  // inclusive scan of the thread totals within the warp
        for (int o = 1; o < 32; o <<= 1) {
            const float t = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o) incl += t;
        }
        if (lane == 31) warp_totals[warp] = incl;
        __syncthreads();
        float warp_offset = 0.0f, tile_total = 0.0f;
        for (int w = 0; w < WARPS; ++w) {
            if (w < warp) warp_offset += warp_totals[w];
            tile_total += warp_totals[w];
        }
        const float offset = carry_s + warp_offset + incl - local;
        for (int k = 0; k < 4; ++k) {
            if (j0 + k < cols) yr[j0 + k] = v[k] + offset;
        }
        __syncthreads();  // everyone has read carry_s and warp_totals
        if (threadIdx.x == 0) carry_s += tile_total;
        __syncthreads();
    }
}

cudaError_t softmax_rows_launch(const float* x, float* y, int64_t rows, int64_t cols, float inv_temp,
                                float out_scale, bool log_mode, bool causal, cudaStream_t stream) {
    if (rows > 0) softmax_rows<<<(unsigned)rows, THREADS, 0, stream>>>(x, y, cols, inv_temp, out_scale, log_mode, causal);
    return cudaGetLastError();
}

cudaError_t norm_rows_launch(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols,
                             int mode, float eps, cudaStream_t stream) {
    if (rows > 0) norm_rows<<<(unsigned)rows, THREADS, 0, stream>>>(x, w, b, y, cols, mode, eps);
    return cudaGetLastError();
}

cudaError_t reduce_rows_launch(const float* x, const float* s, float* y, int64_t rows, int64_t cols, int op,
                               cudaStream_t stream) {
    if (rows > 0) reduce_rows<<<(unsigned)rows, THREADS, 0, stream>>>(x, s, y, cols, op);
    return cudaGetLastError();
}

cudaError_t cumsum_rows_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows > 0) cumsum_rows<<<(unsigned)rows, THREADS, 0, stream>>>(x, y, cols);
    return cudaGetLastError();
}
