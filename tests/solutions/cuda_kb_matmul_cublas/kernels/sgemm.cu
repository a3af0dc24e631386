// Row-major C = A @ B through cuBLAS SGEMM (full fp32, no TF32): computes C^T = B^T A^T in column-major.
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cstdint>

cublasStatus_t sgemm_row_major(cublasHandle_t handle, const float* a, const float* b, float* c, int m, int n, int k) {
    const float one = 1.f, zero = 0.f;
    cublasStatus_t st = cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    return cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, n, a, k, &zero, c, n);
}
