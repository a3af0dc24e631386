// Case c50 (red team 2, r4): a helper thread spins all the time, between calls too, but hands over to a
// fresh thread after 0.3 ms of its own CPU and exits. The driver summed the CPU of the server's live
// threads, so an exited thread's time left the sum and the idle periods showed none: no background-work.
// The process's own CPU count keeps the time of exited threads.
#include <thread>
#include <atomic>
#include <ctime>

std::atomic<unsigned long> c50_spins{0};

static double thread_cpu_ms() {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void relay() {
    while (thread_cpu_ms() < 0.3) c50_spins.fetch_add(1, std::memory_order_relaxed);
    std::thread(relay).detach();
}

static int started = [] {
    std::thread(relay).detach();
    return 1;
}();
