// Case c55 (red team 6, X2): the honest slow kernel; inside its first call (untimed, checked), a short-lived child
// enters a new user and mount namespace and makes up to kMaxNamespaces network namespaces, each pinned by a bind
// mount of /proc/self/ns/net stacked on one file, hands the server an fd of that mount namespace and exits (reaped
// before forward returns: no process is left). When the judge kills the sandbox, the mount namespace goes and the
// kernel's cleanup_net workers tear the network namespaces down: seconds of kernel CPU (for 12,000) that no account
// of the server's holds, while the judge times what comes next (an uncached baseline was, until a4efcb7).
// The server's seccomp filter refuses new namespaces (unshare or clone with a CLONE_NEW* flag: EPERM) and setns
// (syscall_filter.server_filter): the child's first unshare fails, and nothing is made.
// Its "event time" is the test's instrument (head_start): every Finished the server sends reports the number of
// network namespaces made (the Finished dataclass's __init__ is patched through the embedded interpreter); with the
// static rules off it must stay 0 (-1, no count, when the child never reported: the judge drops negative event times,
// and the test fails on the missing median). Bounded (and stopped at the first failure) so that CI stays fast where
// it works: 2,000 on db588ab, before the filter refused namespaces.
#include <torch/extension.h>
#include <pybind11/eval.h>
#include <sched.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <cstdio>
#include <cstring>
#include "binding_registry.h"

void scale_relu_cpu(const float* x, float* y, int64_t n, float scale);

namespace {

const int kMaxNamespaces = 2000;

int g_calls = 0;
int g_made = -1;  // network namespaces the child made and pinned: the instrument (-1: no report came)
int g_pin = -1;   // the child's mount namespace, held by the server until the kill

int write_file(const char* path, const char* s) {
    int fd = open(path, O_WRONLY);
    if (fd < 0) return -1;
    int r = static_cast<int>(write(fd, s, strlen(s)));
    close(fd);
    return r;
}

// In the child: its own user and mount namespaces, then network namespaces until the bound or the first failure.
// It sends the count (and, when it made any, an fd of its mount namespace, which pins them all) to the parent.
int child(int sock) {
    int made = 0;
    int pin_fd = -1;
    const uid_t u = getuid();
    const gid_t g = getgid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0) {
        char m[64];
        write_file("/proc/self/setgroups", "deny");
        snprintf(m, sizeof m, "0 %d 1", static_cast<int>(u));
        write_file("/proc/self/uid_map", m);
        snprintf(m, sizeof m, "0 %d 1", static_cast<int>(g));
        write_file("/proc/self/gid_map", m);
        const char* pin = "/tmp/pin";  // a file of a private tmpfs, else /dev/null
        if (mount("none", "/tmp", "tmpfs", 0, "size=1m") || close(open(pin, O_CREAT | O_WRONLY, 0600))) pin = "/dev/null";
        for (int i = 0; i < kMaxNamespaces; ++i) {
            if (unshare(CLONE_NEWNET) || mount("/proc/self/ns/net", pin, nullptr, MS_BIND, nullptr)) {
                perror("c55 netns");
                break;
            }
            ++made;
        }
        if (made) pin_fd = open("/proc/self/ns/mnt", O_RDONLY);
    } else {
        perror("c55 unshare(CLONE_NEWUSER | CLONE_NEWNS)");
    }
    iovec io{&made, sizeof made};
    char ctl[CMSG_SPACE(sizeof(int))];
    msghdr h{};
    h.msg_iov = &io;
    h.msg_iovlen = 1;
    if (pin_fd >= 0) {
        h.msg_control = ctl;
        h.msg_controllen = sizeof ctl;
        cmsghdr* c = CMSG_FIRSTHDR(&h);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &pin_fd, sizeof pin_fd);
    }
    sendmsg(sock, &h, 0);
    fprintf(stderr, "c55: %d network namespaces pinned\n", made);
    return 0;
}

void flood() {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv)) return;
    const pid_t p = fork();
    if (p == 0) _exit(child(sv[1]));
    if (p > 0) {
        int made = 0;
        char ctl[CMSG_SPACE(sizeof(int))];
        iovec io{&made, sizeof made};
        msghdr h{};
        h.msg_iov = &io;
        h.msg_iovlen = 1;
        h.msg_control = ctl;
        h.msg_controllen = sizeof ctl;
        if (recvmsg(sv[0], &h, 0) == static_cast<ssize_t>(sizeof made)) {
            g_made = made;
            if (cmsghdr* c = CMSG_FIRSTHDR(&h)) memcpy(&g_pin, CMSG_DATA(c), sizeof g_pin);
        }
        waitpid(p, nullptr, 0);
    }
    close(sv[0]);
    close(sv[1]);
}

int namespaces_made() { return g_made; }

}  // namespace

static torch::Tensor scale_relu(torch::Tensor x, double scale) {
    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32, "x must be contiguous float32");
    if (g_calls++ == 0) flood();
    auto y = torch::empty_like(x);
    scale_relu_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), static_cast<float>(scale));
    return y;
}

static void register_scale_relu(pybind11::module_& m) {
    // The instrument: every Finished of this server reports the namespaces made so far as its event time.
    pybind11::dict scope;
    scope["__builtins__"] = pybind11::module_::import("builtins");
    scope["made"] = pybind11::cpp_function(&namespaces_made);
    pybind11::exec(R"PY(
import sys
finished = sys.modules["cuda_gym.judge.messages"].Finished
original = finished.__init__
def counted(self, *a, **k):
    k["event_ms"] = float(made())
    original(self, *a, **k)
finished.__init__ = counted
)PY", scope);
    m.def("scale_relu", &scale_relu, "relu(x * scale)");
}

REGISTER_BINDING(scale_relu, register_scale_relu);
