// y = epilogue(a @ op(b)): cuBLAS SGEMM (full fp32, no TF32, as eager PyTorch does), then one fused pass
// for bias, scale, activation and residual terms, instead of one eager kernel per op.
#include <cstdint>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "gemm.h"

__device__ __forceinline__ float activate(float v, int act, float slope) {
    switch (act) {
        case ACT_RELU: return fmaxf(v, 0.0f);
        case ACT_LEAKY_RELU: return v > 0.0f ? v : v * slope;
        case ACT_GELU: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
        case ACT_SIGMOID: return 1.0f / (1.0f + expf(-v));
        case ACT_SWISH: return v / (1.0f + expf(-v));
        default: return v;
    }
}

// v = acc + bias[col]; pre = v; v = act((v - sub) * mul); y = v * post + res_coef * pre + residual
__global__ void epilogue_kernel(float* __restrict__ y, const float* __restrict__ bias,
                                const float* __restrict__ residual, int64_t total, int64_t n, Epilogue e) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += stride) {
        float v = y[i];
        if (bias != nullptr) v += bias[i % n];
        const float pre = v;
        v = activate((v - e.sub) * e.mul, e.act, e.slope) * e.post;
        if (e.res_coef != 0.0f) v += e.res_coef * pre;
        if (residual != nullptr) v += residual[i];
        y[i] = v;
    }
}

cublasStatus_t gemm_epilogue_run(cublasHandle_t handle, cudaStream_t stream, const float* a, const float* b,
                                 bool b_is_weight, const float* bias, const float* residual, float* y, int m, int n,
                                 int k, Epilogue e) {
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = cublasSetStream(handle, stream);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    st = cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    // Row-major y (m x n) is column-major y^T (n x m) = op(b)^T a^T.
    if (b_is_weight) {  // b is (n, k): y = a @ b^T
        st = cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, b, k, a, k, &zero, y, n);
    } else {  // b is (k, n): y = a @ b
        st = cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, n, a, k, &zero, y, n);
    }
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    const bool trivial = bias == nullptr && residual == nullptr && e.act == ACT_NONE && e.sub == 0.0f &&
                         e.mul == 1.0f && e.post == 1.0f && e.res_coef == 0.0f;
    if (!trivial) {
        const int64_t total = static_cast<int64_t>(m) * n;
        int64_t blocks = (total + 255) / 256;
        if (blocks > 132 * 32) blocks = 132 * 32;
        epilogue_kernel<<<(unsigned)blocks, 256, 0, stream>>>(y, bias, residual, total, n, e);
        if (cudaGetLastError() != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    return CUBLAS_STATUS_SUCCESS;
}

// Attention on the packed qkv (b, t, 3c) output of the input projection, head h at columns h*d of each
// third: scores[b, h] = q k^T * alpha (t x t), then y[b, :, h*d:(h+1)*d] = p[b, h] v. One strided batched
// SGEMM per batch element, batched over heads (heads are d columns apart).
cublasStatus_t attention_scores_run(cublasHandle_t handle, cudaStream_t stream, const float* qkv, float* scores, int b,
                                    int t, int h, int d, float alpha) {
    const float zero = 0.0f;
    const int c = h * d, ld = 3 * c;
    cublasStatus_t st = cublasSetStream(handle, stream);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);
    for (int i = 0; i < b && st == CUBLAS_STATUS_SUCCESS; ++i) {
        const float* q = qkv + (int64_t)i * t * ld;
        const float* k = q + c;
        float* s = scores + (int64_t)i * h * t * t;
        // row-major S (t x t) = Q K^T is column-major S^T = K Q^T: K^T as stored is (d x t) column-major
        st = cublasSgemmStridedBatched(handle, CUBLAS_OP_T, CUBLAS_OP_N, t, t, d, &alpha, k, ld, d, q, ld, d, &zero, s, t,
                                       (int64_t)t * t, h);
    }
    return st;
}

cublasStatus_t attention_values_run(cublasHandle_t handle, cudaStream_t stream, const float* probs, const float* qkv,
                                    float* y, int b, int t, int h, int d) {
    const float one = 1.0f, zero = 0.0f;
    const int c = h * d, ld = 3 * c;
    cublasStatus_t st = cublasSetStream(handle, stream);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);
    for (int i = 0; i < b && st == CUBLAS_STATUS_SUCCESS; ++i) {
        const float* v = qkv + (int64_t)i * t * ld + 2 * c;
        const float* p = probs + (int64_t)i * h * t * t;
        float* out = y + (int64_t)i * t * c;
        // row-major Y_h (t x d, row stride c) = P V: column-major Y_h^T = V^T P^T
        st = cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, d, t, t, &one, v, ld, d, p, t, (int64_t)t * t,
                                       &zero, out, c, d, h);
    }
    return st;
}
