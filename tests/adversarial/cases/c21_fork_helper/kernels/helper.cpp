// A helper process started when the module loads, outside the candidate's thread count.
#include <sys/types.h>

extern "C" int fork();
extern "C" void _exit(int status);

static int helper_started = [] {
    if (fork() == 0) _exit(0);  // this one exits at once; a real helper would keep working
    return 1;
}();
