// FAULT FIXTURE: a kernel that never ends (the per-call bound must end it, JudgeConfig.call_timeout_s).
#include <cstdint>
#include <cuda_runtime.h>

__global__ void spin(float* y) {
    for (;;) {
        if (clock64() == -1) {  // clock64 is volatile: the loop cannot be optimised away
            y[0] = 0.0f;
        }
    }
}

cudaError_t scale_add_relu_launch(const float* x, const float* r, float* y, int64_t n, float scale,
                                  cudaStream_t stream) {
    spin<<<1, 1, 0, stream>>>(y);
    return cudaGetLastError();
}
