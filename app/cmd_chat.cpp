// tandem-cli chat: an interactive chat in the terminal, streaming the answer (reasoning dimmed).
#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <unistd.h>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "tandem/chat.h"

namespace {

constexpr const char* kHelp = "commands: /reset (new conversation), /system TEXT (set the system prompt), /quit\n";

// Ctrl-C during an answer stops that answer and the chat goes on; at the prompt it ends the chat as usual.
std::atomic<bool> stopRequested{false};
extern "C" void requestStop(int) { stopRequested = true; }

void stopAnswersOnInterrupt(bool on) {
    struct sigaction action {};
    action.sa_handler = on ? requestStop : SIG_DFL;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
}

struct Style {
    bool tty = ::isatty(STDOUT_FILENO) != 0;
    const char* dim() const { return tty ? "\033[2m" : ""; }
    const char* plain() const { return tty ? "\033[0m" : ""; }
};

}  // namespace

int runChat(const CommandArgs& argv) {
    const CliArgs args(argv,
                       {"--dense", "--kv-cache", "--model", "--threads", "--context", "--device", "--gpu-memory", "--gpus", "--temperature", "--top-p", "--top-k", "--min-p",
                        "--repetition-penalty", "--seed", "--max-tokens", "--system", "--experts", "--defer",
                        "--reasoning-effort"},
                       {"--no-think", "--defer-prefill"}, {"--stop"});
    tandem::EngineOptions options = engineOptions(args);
    const std::string modelDir = args.required("--model");
    std::fprintf(stderr, "loading %s ...\n", modelDir.c_str());
    auto engine = tandem::Engine::load(modelDir, options);
    reportDevice(engine->info());
    const tandem::Chat chat(*engine, modelDir);
    if (!chat.templateWarning().empty()) std::fprintf(stderr, "note: %s\n", chat.templateWarning().c_str());
    auto session = engine->newSession();
    applyDeferral(args, *session);

    tandem::ChatOptions chatOptions;
    chatOptions.enableThinking = !args.flag("--no-think");
    chatOptions.reasoningEffort = args.optional("--reasoning-effort").value_or("");
    chatOptions.stopStrings = args.repeated("--stop");
    auto& gen = chatOptions.generate;
    gen.maxNewTokens = args.integer("--max-tokens", 1024);
    gen.sampling = engine->info().defaultSampling;
    gen.sampling.temperature = static_cast<float>(args.number("--temperature", gen.sampling.temperature));
    gen.sampling.topP = static_cast<float>(args.number("--top-p", gen.sampling.topP));
    gen.sampling.topK = args.integer("--top-k", gen.sampling.topK);
    gen.sampling.minP = static_cast<float>(args.number("--min-p", gen.sampling.minP));
    gen.sampling.repetitionPenalty = static_cast<float>(args.number("--repetition-penalty", gen.sampling.repetitionPenalty));
    gen.sampling.seed = static_cast<std::uint64_t>(args.integer("--seed", 0));

    std::string system = args.optional("--system").value_or("");
    std::vector<tandem::ChatMessage> conversation;
    const Style style;
    std::fprintf(stderr, "%s on %s. %s", engine->info().modelType.c_str(), engine->info().device.c_str(), kHelp);
    std::string line;
    while (true) {
        std::fputs("> ", stdout);
        std::fflush(stdout);
        if (!std::getline(std::cin, line)) break;
        if (line.empty()) continue;
        if (line == "/quit" || line == "/exit") break;
        if (line == "/reset") {
            conversation.clear();
            std::puts("(new conversation)");
            continue;
        }
        if (line.rfind("/system", 0) == 0) {
            system = line.size() > 8 ? line.substr(8) : "";
            conversation.clear();
            std::printf("(system prompt %s; new conversation)\n", system.empty() ? "cleared" : "set");
            continue;
        }
        if (line[0] == '/') {
            std::fputs(kHelp, stdout);
            continue;
        }
        if (conversation.empty() && !system.empty()) conversation.push_back({"system", system, ""});
        conversation.push_back({"user", line, ""});

        bool inReasoning = false;
        char last = '\n';
        stopRequested = false;
        stopAnswersOnInterrupt(true);
        const auto reply = chat.reply(*session, conversation, chatOptions, [&](tandem::TextKind kind, std::string_view text) {
            const bool reasoning = kind == tandem::TextKind::Reasoning;
            if (reasoning != inReasoning) std::fputs(reasoning ? style.dim() : style.plain(), stdout);
            inReasoning = reasoning;
            std::fwrite(text.data(), 1, text.size(), stdout);
            std::fflush(stdout);
            if (!text.empty()) last = text.back();
            return !stopRequested;
        });
        stopAnswersOnInterrupt(false);
        if (inReasoning) std::fputs(style.plain(), stdout);
        // Each answer ends its line, so piped output has one answer after another and the next prompt
        // starts on a line of its own.
        if (last != '\n') std::fputc('\n', stdout);
        std::fflush(stdout);
        conversation.push_back({"assistant", reply.answer, reply.reasoning});
        const auto& s = reply.stats;
        if (stopRequested) std::fputs("(stopped)\n", stderr);
        std::fprintf(stderr, "[%d tokens, %.1f tok/s, first token after %.0f ms, %d of %d prompt tokens reused]\n",
                     s.generatedTokens, s.decodeTokensPerSecond(), s.timeToFirstTokenSeconds * 1e3, s.reusedTokens,
                     s.promptTokens);
    }
    return 0;
}
