// Case c49 (red team 2, r5b): background work on the server's main thread, which the driver's
// background-work check leaves out (it does the server's own work after each answer). A POSIX timer aimed
// at the importing thread fires SIGALRM every 1 ms; the handler spins 0.5 ms, between calls too. No thread
// or process is added, and gettid is declared by hand (<unistd.h> and syscall are refused). The static rules
// refuse signal handlers and timers; without them it gains nothing (no inputs exist between calls).
#include <signal.h>
#include <sys/time.h>
#include <atomic>
#include <ctime>
extern "C" int gettid(void);

std::atomic<unsigned long> c49_ticks{0};

static double mono_ms() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void on_alarm(int) {
    double end = mono_ms() + 0.5;
    while (mono_ms() < end) c49_ticks.fetch_add(1, std::memory_order_relaxed);
}

static int armed = [] {
    struct sigaction sa {};
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, nullptr);
    sigevent sev {};
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGALRM;
    sev._sigev_un._tid = gettid();
    timer_t timer;
    timer_create(CLOCK_MONOTONIC, &sev, &timer);
    itimerspec every_ms{{0, 1000000}, {0, 1000000}};
    timer_settime(timer, 0, &every_ms, nullptr);
    return 1;
}();
