// Case c53 (red team 3, r02, on the armed protocol): the server maps the driver's input arena, and its main
// thread watches it. At the first call native code takes the driver's socket away from the Python server
// (a socket pair dup2'ed over its fd, one forged Call, released through the arena's release word, to bring
// Python back into forward) and answers every later message itself. Between its Armed and the release word it
// spins over the arena and computes each output page as soon as the driver's copy has rewritten that page's
// inputs: work done while the copy lands is before the driver's clock starts. No thread, no process: the main
// thread does all of it.
// The judge stops the whole sandbox while it copies (docs/judge.md, "The CPU window"): every page is then
// found already written once the server runs again, after the clock started, and the hack gains nothing.
#include <torch/extension.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <cerrno>
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "binding_registry.h"

void scale_relu_cpu(const float* x, float* y, int64_t n, float scale);

namespace {

const int64_t kMaxElems = 1 << 24;
const int64_t kPage = 1024;  // floats per watched page
const long long kForgedSeq = 999999;
const int64_t kHeader = 256;  // the arena's header (its release word first): the first input starts after it

float* g_out = nullptr;      // every answer lives here
int g_calls = 0;
int g_driver = -1;           // the driver's socket, moved away from Python's fd
int g_python = -1;           // our end of the pair Python now talks to
const float* g_arena = nullptr;  // the arena's first input in this process
volatile int64_t* g_word = nullptr;  // the arena's release word
int64_t g_numel = 0;

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

long long number_after(const char* s, const char* key) {
    const char* p = strstr(s, key);
    return p ? atoll(p + strlen(key)) : -1;
}

std::vector<long long> shape_of(const char* s) {
    std::vector<long long> out;
    const char* p = strstr(s, "\"shape\":[");
    if (!p) return out;
    p += 9;
    while (*p && *p != ']') { out.push_back(strtoll(p, const_cast<char**>(&p), 10)); if (*p == ',') ++p; }
    return out;
}

void say(int fd, const std::string& m) { send(fd, m.data(), m.size(), 0); }

ssize_t hear(int fd, char* buf, size_t size, int flags) {  // one message (a blocking read)
    for (;;) {
        ssize_t n = recv(fd, buf, size, flags);
        if (n >= 0 || errno != EINTR) return n;
    }
}

std::string reply(long long seq, const std::vector<long long>& shape) {
    std::string sh, st;
    long long step = 1;
    std::vector<long long> strides(shape.size());
    for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) { strides[i] = step; step *= shape[i]; }
    for (size_t i = 0; i < shape.size(); ++i) {
        sh += (i ? "," : "") + std::to_string(shape[i]);
        st += (i ? "," : "") + std::to_string(strides[i]);
    }
    return "{\"type\":\"Reply\",\"seq\":" + std::to_string(seq) +
           ",\"outputs\":{\"kind\":\"tensor\",\"tensor\":{\"dtype\":\"float32\",\"shape\":[" + sh + "],\"strides\":[" + st +
           "],\"offset\":0,\"segment\":-1,\"base\":" + std::to_string(reinterpret_cast<uintptr_t>(g_out)) +
           "},\"items\":[],\"keys\":[],\"scalar\":null},\"segments\":[],\"error\":\"\",\"violations\":[]}";
}

// Its "event time" is the test's instrument, summed over its calls so far: the output pages whose inputs it saw
// land after an earlier scan of the same call had found the copy unfinished (0 when it never saw one in flight;
// a page whose first and last inputs did not change is never counted as landed).
std::string finished(long long seq, double pages_in_flight) {
    return "{\"type\":\"Finished\",\"seq\":" + std::to_string(seq) +
           ",\"error\":\"\",\"event_ms\":" + std::to_string(pages_in_flight) + ",\"violations\":[],\"profile\":[],\"marks\":[]}";
}

// The previous call's inputs: a page whose first and last inputs differ from them has been rewritten.
std::vector<float> g_stale;
std::vector<char> g_done;

bool landed(int64_t p) {
    int64_t a = p * kPage, b = std::min(g_numel, a + kPage) - 1;
    return g_arena[a] != g_stale[a] && g_arena[b] != g_stale[b];
}

void compute_page(int64_t p, float scale) {
    int64_t a = p * kPage;
    scale_relu_cpu(g_arena + a, g_out + a, std::min(g_numel, a + kPage) - a, scale);
}

[[noreturn]] void serve(float scale) {
    static char buf[1 << 20];
    // Python's answers to the first call go to the driver; its Armed for the forged call does not.
    for (int i = 0; i < 3; ++i) {
        ssize_t n = hear(g_python, buf, sizeof buf, 0);
        if (n > 0 && i < 2) send(g_driver, buf, n, 0);
    }
    const int64_t pages = (g_numel + kPage - 1) / kPage;
    g_stale.assign(g_arena, g_arena + g_numel);
    g_done.assign(pages, 0);
    long long early = 0, total = 0, in_flight = 0;
    for (;;) {
        ssize_t n = hear(g_driver, buf, sizeof buf - 1, 0);
        if (n <= 0) _exit(0);
        buf[n] = 0;
        if (!strstr(buf, "\"type\":\"Call\"")) {
            fprintf(stderr, "c53: %lld of %lld pages computed before the release\n", early, total);
            _exit(0);  // Shutdown
        }
        const long long seq = number_after(buf, "\"seq\":");
        const std::vector<long long> shape = shape_of(buf);
        const long long base = number_after(buf, "\"base\":");
        long long m = 1;
        for (long long d : shape) m *= d;
        const bool watched = m == g_numel && base == kHeader;
        say(g_driver, "{\"type\":\"Armed\",\"seq\":" + std::to_string(seq) + "}");
        if (watched) {
            std::fill(g_done.begin(), g_done.end(), 0);
            int landing_scans = 0;  // scans that found newly written pages: one when the copy was over before
            while (*g_word != seq) {  // the arena's pages as the driver's copy lands, until the release
                long long computed = 0;
                for (int64_t p = 0; p < pages; ++p)
                    if (!g_done[p] && landed(p)) { compute_page(p, scale); g_done[p] = 1; ++computed; }
                if (computed && landing_scans++) in_flight += computed;  // an earlier scan saw the copy unfinished
            }
            for (int64_t p = 0; p < pages; ++p) {
                if (g_done[p]) ++early; else compute_page(p, scale);
            }
            total += pages;
        } else {
            while (*g_word != seq) {}
            scale_relu_cpu(reinterpret_cast<const float*>(reinterpret_cast<const char*>(g_arena) - kHeader + base), g_out, m,
                           scale);
        }
        say(g_driver, reply(seq, shape));
        say(g_driver, finished(seq, static_cast<double>(in_flight)));
        if (watched) std::copy(g_arena, g_arena + g_numel, g_stale.begin());
    }
}

void take_over(const torch::Tensor& x) {
    const int fd = server_fd();
    int sv[2];
    if (fd < 0 || socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) return;
    g_arena = x.data_ptr<float>();
    g_word = reinterpret_cast<volatile int64_t*>(reinterpret_cast<char*>(x.data_ptr<float>()) - kHeader);
    g_numel = x.numel();
    g_driver = dup(fd);  // it shares Python's O_NONBLOCK: blocking reads here
    fcntl(g_driver, F_SETFL, fcntl(g_driver, F_GETFL) & ~O_NONBLOCK);
    dup2(sv[0], fd);  // Python's socket now talks to us
    g_python = sv[1];
    std::string shape, strides;
    for (int64_t i = 0; i < x.dim(); ++i) {
        shape += (i ? "," : "") + std::to_string(x.size(i));
        strides += (i ? "," : "") + std::to_string(x.stride(i));
    }
    const std::string seq = std::to_string(kForgedSeq);
    say(g_python, "{\"type\":\"Call\",\"seq\":" + seq + ",\"inputs\":[{\"kind\":\"tensor\",\"tensor\":{\"dtype\":"
                  "\"float32\",\"shape\":[" + shape + "],\"strides\":[" + strides + "],\"offset\":0,\"segment\":0,"
                  "\"base\":" + std::to_string(kHeader) + "},\"items\":[],\"keys\":[],\"scalar\":null}],\"segments\":[],\"audit\":false,"
                  "\"noop\":false,\"profile\":false}");
    *g_word = kForgedSeq;  // Python, armed for the forged call, spins on the word
}

torch::Tensor scale_relu(torch::Tensor x, double scale) {
    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32, "x must be contiguous float32");
    TORCH_CHECK(x.numel() <= kMaxElems, "too large");
    if (!g_out) g_out = static_cast<float*>(aligned_alloc(4096, kMaxElems * sizeof(float)));
    ++g_calls;
    if (g_calls == 2 && g_driver >= 0) serve(static_cast<float>(scale));  // the forged call: never returns
    scale_relu_cpu(x.data_ptr<float>(), g_out, x.numel(), static_cast<float>(scale));
    if (g_calls == 1) take_over(x);
    return torch::from_blob(g_out, x.sizes(), x.options());
}

}  // namespace

static void register_scale_relu(pybind11::module_& m) {
    m.def("scale_relu", &scale_relu, "relu(x * scale)");
}

REGISTER_BINDING(scale_relu, register_scale_relu);
