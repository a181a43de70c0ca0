// tandem-cli: the engine from the command line. Wiring only: each command lives in its own file.
#include <algorithm>
#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "commands.h"
#include "tandem/error.h"

namespace {

constexpr const char* kUsage = R"(usage: tandem-cli COMMAND [options]

commands:
  bench-moe --shape deepseek-v3|qwen3-30b-a3b|deepseek-v2-lite --experts bf16|int8|int4
            [--tokens N[,N...]] [--threads N] [--json] [--verify] [--kernels auto|gemv|gemm]
            [--gemm-min-rows N] [--experts-in-memory N] [--seconds S] [--sweep ROWS[,ROWS...]]
            Time one MoE layer of that model's shape (random weights and routing) on the CPU expert
            engine next to the memory bandwidth measured in the same run. --verify first checks the
            selected kernels (TANDEM_CPU_ISA) against the scalar ones; --sweep times GEMV against
            GEMM kernels at the given rows per expert. With --json the last line is a JSON object.
  eval      --model DIR --ids-file FILE --new-tokens N --logits-out FILE [--threads N]
            Prefill the prompt ids in FILE, then decode N tokens greedily. Writes every logits row
            (prompt positions, then one row per generated token) as little-endian float32 to the
            --logits-out file and prints the generated ids.
  generate  --model DIR (--ids "ID ..." | --ids-file FILE) [--new-tokens N] [--temperature T]
            [--top-p P] [--top-k K] [--seed S] [--threads N] [--context N]
            Generate from prompt ids, printing ids as they come and the speed at the end.

  --help    this text
)";

struct Command {
    const char* name;
    int (*run)(const CommandArgs&);
};

constexpr Command kCommands[] = {
    {"bench-moe", runBenchMoe},
    {"eval", runEval},
    {"generate", runGenerate},
};

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> rest(argv + std::min(argc, 2), argv + argc);
    const std::string command = argc > 1 ? argv[1] : "";
    try {
        for (const auto& c : kCommands)
            if (command == c.name) return c.run(rest);
        if (command == "--help" || command == "-h" || command == "help") {
            std::fputs(kUsage, stdout);
            return 0;
        }
        std::fputs(command.empty() ? "tandem-cli: no command given\n\n" : ("tandem-cli: unknown command '" + command + "'\n\n").c_str(), stderr);
        std::fputs(kUsage, stderr);
        return 2;
    } catch (const tandem::Error& e) {
        std::fprintf(stderr, "tandem-cli: %s\n", e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "tandem-cli: out of memory; try a smaller model, a shorter context or fewer threads\n");
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tandem-cli: internal error: %s\n", e.what());
        return 1;
    }
}
