// Case c54 (red team 6, X1): the honest slow kernel; at the first call, native code sends one 1-byte packet on the
// server's protocol socket carrying, in SCM_RIGHTS, both ends of a loopback TCP connection (the sandbox keeps `lo`)
// whose sending end has SO_LINGER {1, 3600 s} and a full send buffer that the other end never drains. Both ends are
// the driver's alone once the packet is queued: nothing in the sandbox can end what their release does.
// The driver refuses the packet (not a message). Before the fix (cf5144f and earlier) it closed the received
// descriptors in its own thread, and the close() of the lingering end blocked in the kernel (tcp_close ->
// sk_stream_wait_close) for the linger time, past every bound of the driver's: a 3600 s linger made the judgement
// a JudgeError after twice the reference worker's timeout. Now the driver's process never drops the last reference
// to a socket a server sent: a closer process does (cuda_gym/fd_closer.py), killed when it does not confirm within
// 1 s. The call ends as the candidate's -1 at once.
#include <torch/extension.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "binding_registry.h"

void scale_relu_cpu(const float* x, float* y, int64_t n, float scale);

namespace {

const int kLingerS = 3600;  // a regression is a hang past the test's timeout, not a pass

int server_fd() {  // /proc/self/cmdline: python -m cuda_gym.judge.candidate_server FD ...
    FILE* f = fopen("/proc/self/cmdline", "rb");
    if (!f) return -1;
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    std::vector<std::string> args;
    for (size_t i = 0; i < n;) { args.emplace_back(buf + i); i += args.back().size() + 1; }
    for (size_t i = 0; i + 1 < args.size(); ++i)
        if (args[i] == "cuda_gym.judge.candidate_server") return atoi(args[i + 1].c_str());
    return -1;
}

void plant_linger() {
    const int sfd = server_fd();
    if (sfd < 0) return;
    int lst = socket(AF_INET, SOCK_STREAM, 0);
    int small = 4096;
    setsockopt(lst, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (bind(lst, reinterpret_cast<sockaddr*>(&a), sizeof a) || listen(lst, 1)) { perror("c54 listen"); return; }
    socklen_t len = sizeof a;
    getsockname(lst, reinterpret_cast<sockaddr*>(&a), &len);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(c, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    if (connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a)) { perror("c54 connect"); return; }
    int acc = accept(lst, nullptr, nullptr);
    linger lg{1, kLingerS};
    setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    fcntl(c, F_SETFL, O_NONBLOCK);
    static char junk[65536];
    long sent = 0;
    for (;;) {  // until EAGAIN: the accepted end never reads, so the window stays shut
        ssize_t n = send(c, junk, sizeof junk, 0);
        if (n <= 0) break;
        sent += n;
    }
    int fds[2] = {c, acc};
    char one = 'x';
    iovec io{&one, 1};
    char ctl[CMSG_SPACE(sizeof fds)];
    msghdr m{};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    cmsghdr* h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(h), fds, sizeof fds);
    const ssize_t r = sendmsg(sfd, &m, 0);
    fprintf(stderr, "c54: %ld bytes unsent behind linger %d s, fds %d %d sent on socket %d: %zd\n", sent, kLingerS, c,
            acc, sfd, r);
    close(c);  // the driver holds the only references now
    close(acc);
    close(lst);
}

int g_calls = 0;

}  // namespace

static torch::Tensor scale_relu(torch::Tensor x, double scale) {
    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32, "x must be contiguous float32");
    if (g_calls++ == 0) plant_linger();
    auto y = torch::empty_like(x);
    scale_relu_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), static_cast<float>(scale));
    return y;
}

static void register_scale_relu(pybind11::module_& m) {
    m.def("scale_relu", &scale_relu, "relu(x * scale)");
}

REGISTER_BINDING(scale_relu, register_scale_relu);
