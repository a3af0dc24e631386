// Single-pass kernels of the builtin tasks that are one fused memory pass: bias + GELU, SwiGLU, x + z^T,
// masked mean pooling and GroupNorm + SiLU.
#include <cstdint>
#include <cuda_runtime.h>

constexpr int THREADS = 256;

__device__ __forceinline__ float gelu_tanh(float v) {
    return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
}

__device__ __forceinline__ float silu(float v) { return v / (1.0f + expf(-v)); }

static unsigned row_grid(int64_t rows) { return static_cast<unsigned>(rows < 65535 ? rows : 65535); }

static unsigned col_blocks(int64_t cols) {
    int64_t b = (cols + THREADS - 1) / THREADS;
    return static_cast<unsigned>(b < 1 ? 1 : (b > 1024 ? 1024 : b));
}

// y[r, j] = gelu_tanh(x[r, j] + bias[j]); rows over grid.y, columns over grid.x (no division per element).
__global__ void bias_gelu_kernel(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ y,
                                 int64_t rows, int64_t cols) {
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < cols; j += (int64_t)gridDim.x * blockDim.x) {
            y[r * cols + j] = gelu_tanh(x[r * cols + j] + bias[j]);
        }
    }
}

// y[r, j] = silu(x[r, j]) * x[r, half + j] for a row of 2 * half.
__global__ void swiglu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t half) {
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float* xr = x + r * 2 * half;
        for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < half; j += (int64_t)gridDim.x * blockDim.x) {
            y[r * half + j] = silu(xr[j]) * xr[half + j];
        }
    }
}

// y = x + z^T for n x n matrices: 32 x 32 tiles of z go through shared memory so both reads coalesce.
__global__ void transpose_add_kernel(const float* __restrict__ x, const float* __restrict__ z, float* __restrict__ y,
                                     int64_t n) {
    __shared__ float tile[32][33];
    const int64_t bx = (int64_t)blockIdx.x * 32, by = (int64_t)blockIdx.y * 32;
    for (int k = threadIdx.y; k < 32; k += blockDim.y) {  // tile[k][tx] = z[bx + k][by + tx]
        const int64_t r = bx + k, c = by + threadIdx.x;
        if (r < n && c < n) tile[k][threadIdx.x] = z[r * n + c];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < 32; k += blockDim.y) {  // y[by + k][bx + tx] = x[..] + z[bx + tx][by + k]
        const int64_t r = by + k, c = bx + threadIdx.x;
        if (r < n && c < n) y[r * n + c] = x[r * n + c] + tile[threadIdx.x][k];
    }
}

// y[b, j] = sum_t m[b, t] x[b, t, j] / max(sum_t m[b, t], 1) * out_scale. Rows whose weight is 0 add
// nothing and are not read (the mask keeps about one row in ten).
__global__ void masked_mean_kernel(const float* __restrict__ x, const float* __restrict__ m, float* __restrict__ y,
                                   int64_t seq, int64_t hidden, float out_scale) {
    const int64_t b = blockIdx.y;
    const int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const float* mb = m + b * seq;
    const float* xb = x + b * seq * hidden;
    float acc = 0.0f, count = 0.0f;
    for (int64_t t = 0; t < seq; ++t) {
        const float w = mb[t];
        count += w;
        if (w != 0.0f && j < hidden) acc += w * xb[t * hidden + j];
    }
    if (j < hidden) y[b * hidden + j] = acc / fmaxf(count, 1.0f) * out_scale;
}

__device__ float block_sum(float v, float* smem) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
    __syncthreads();
    v = (threadIdx.x & 31) < (THREADS / 32) ? smem[threadIdx.x & 31] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// One block per (sample, group): mean, then the exact centred variance, then affine + SiLU per channel.
__global__ void groupnorm_silu_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                      const float* __restrict__ b, float* __restrict__ y, int channels, int groups,
                                      int64_t hw, float eps) {
    __shared__ float smem[THREADS / 32];
    const int64_t ng = blockIdx.x;
    const int g = static_cast<int>(ng % groups);
    const int per_group = channels / groups;
    const int64_t count = (int64_t)per_group * hw;
    const float* xg = x + ng * count;
    float* yg = y + ng * count;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < count; i += THREADS) s += xg[i];
    const float mean = block_sum(s, smem) / (float)count;
    float q = 0.0f;
    for (int64_t i = threadIdx.x; i < count; i += THREADS) {
        const float d = xg[i] - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(block_sum(q, smem) / (float)count + eps);
    for (int64_t i = threadIdx.x; i < count; i += THREADS) {
        const int c = g * per_group + static_cast<int>(i / hw);
        yg[i] = silu((xg[i] - mean) * rstd * w[c] + b[c]);
    }
}

cudaError_t bias_gelu_launch(const float* x, const float* bias, float* y, int64_t rows, int64_t cols, cudaStream_t s) {
    if (rows > 0 && cols > 0) bias_gelu_kernel<<<dim3(col_blocks(cols), row_grid(rows)), THREADS, 0, s>>>(x, bias, y, rows, cols);
    return cudaGetLastError();
}

cudaError_t swiglu_launch(const float* x, float* y, int64_t rows, int64_t half, cudaStream_t s) {
    if (rows > 0 && half > 0) swiglu_kernel<<<dim3(col_blocks(half), row_grid(rows)), THREADS, 0, s>>>(x, y, rows, half);
    return cudaGetLastError();
}

cudaError_t transpose_add_launch(const float* x, const float* z, float* y, int64_t n, cudaStream_t s) {
    const unsigned tiles = static_cast<unsigned>((n + 31) / 32);
    if (n > 0) transpose_add_kernel<<<dim3(tiles, tiles), dim3(32, 8), 0, s>>>(x, z, y, n);
    return cudaGetLastError();
}

cudaError_t masked_mean_launch(const float* x, const float* m, float* y, int64_t batch, int64_t seq, int64_t hidden,
                               float out_scale, cudaStream_t s) {
    const unsigned blocks = static_cast<unsigned>((hidden + THREADS - 1) / THREADS);
    if (batch > 0 && hidden > 0) masked_mean_kernel<<<dim3(blocks, static_cast<unsigned>(batch)), THREADS, 0, s>>>(x, m, y, seq, hidden, out_scale);
    return cudaGetLastError();
}

cudaError_t groupnorm_silu_launch(const float* x, const float* w, const float* b, float* y, int64_t n, int channels,
                                  int groups, int64_t hw, float eps, cudaStream_t s) {
    if (n > 0) groupnorm_silu_kernel<<<static_cast<unsigned>(n * groups), THREADS, 0, s>>>(x, w, b, y, channels, groups, hw, eps);
    return cudaGetLastError();
}
