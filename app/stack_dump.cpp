#include "stack_dump.h"

#include <dirent.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tandem::cli {

namespace {

// One thread's stack, written as one block (a single write for the header, then the frames).
void dumpThisThread(int) {
    void* frames[48];
    const int n = backtrace(frames, 48);
    char header[64];
    const int len = std::snprintf(header, sizeof header, "thread %ld:\n", static_cast<long>(syscall(SYS_gettid)));
    if (len > 0) (void)!write(STDERR_FILENO, header, static_cast<std::size_t>(len));
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
    usleep(20000);  // the next thread's block after this one's
}

// Whichever thread gets SIGUSR1 asks every thread of the process, itself included, in turn.
void dumpAllThreads(int) {
    const pid_t pid = getpid();
    DIR* tasks = opendir("/proc/self/task");
    if (!tasks) return;
    while (const dirent* e = readdir(tasks)) {
        if (e->d_name[0] == '.') continue;
        const long tid = std::strtol(e->d_name, nullptr, 10);
        syscall(SYS_tgkill, pid, tid, SIGUSR2);
        usleep(50000);
    }
    closedir(tasks);
}

}  // namespace

void installStackDumpIfAsked() {
    const char* asked = std::getenv("TANDEM_DEBUG_STACKS");
    if (!asked || std::strcmp(asked, "1") != 0) return;
    void* warm[1];
    backtrace(warm, 1);  // loads libgcc now, not inside a signal handler
    struct sigaction one{}, all{};
    one.sa_handler = dumpThisThread;
    one.sa_flags = SA_RESTART;
    sigaction(SIGUSR2, &one, nullptr);
    all.sa_handler = dumpAllThreads;
    all.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &all, nullptr);
}

}  // namespace tandem::cli
