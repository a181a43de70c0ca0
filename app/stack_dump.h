#pragma once
// TANDEM_DEBUG_STACKS=1: SIGUSR1 makes tandem-cli write every thread's call stack to stderr (each thread
// its own block, "thread TID:" then one frame a line as binary(+offset); addr2line -f -C -e tandem-cli
// turns offsets into names). For a process that hangs where no debugger is installed (the GPU machine).
namespace tandem::cli {
void installStackDumpIfAsked();
}
