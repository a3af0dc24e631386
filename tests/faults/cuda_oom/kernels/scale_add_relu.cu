// FAULT FIXTURE: takes every byte of GPU memory it can get, then fails with out of memory.
#include <cstdint>
#include <cuda_runtime.h>

#include <vector>

cudaError_t scale_add_relu_launch(const float* x, const float* r, float* y, int64_t n, float scale,
                                  cudaStream_t stream) {
    static std::vector<void*> hoard;  // never freed: only the end of the process gives it back
    for (size_t chunk = size_t(1) << 32; chunk >= (size_t(1) << 20);) {
        void* p = nullptr;
        if (cudaMalloc(&p, chunk) == cudaSuccess) {
            hoard.push_back(p);
        } else {
            cudaGetLastError();
            chunk /= 2;
        }
    }
    return cudaErrorMemoryAllocation;
}
