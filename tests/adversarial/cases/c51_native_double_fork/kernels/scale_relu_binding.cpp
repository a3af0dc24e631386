// Case c51 (red team 2, r3): a helper process forked twice at the first call. Reparented to the sandbox's
// init, it was no child of the server (no `process` finding) and its CPU time no thread of the server's (no
// background-work). Here it only waits: what is checked is that it is seen. (The red team's version spun on
// the input arena and answered from a shared mapping; its head start is bounded by the input copy.)
#include <torch/extension.h>
#include <unistd.h>
#include <sys/wait.h>
#include "binding_registry.h"

void scale_relu_cpu(const float* x, float* y, int64_t n, float scale);

static bool forked = false;

static void start_helper() {
    pid_t p = fork();
    if (p == 0) {
        if (fork() == 0) {
            setsid();
            for (;;) pause();
        }
        _exit(0);
    }
    if (p > 0) waitpid(p, nullptr, 0);
}

static torch::Tensor scale_relu(torch::Tensor x, double scale) {
    if (!forked) {
        forked = true;
        start_helper();
    }
    auto y = torch::empty_like(x);
    scale_relu_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), static_cast<float>(scale));
    return y;
}

static void register_scale_relu(pybind11::module_& m) {
    m.def("scale_relu", &scale_relu, "relu(x * scale)");
}

REGISTER_BINDING(scale_relu, register_scale_relu);
