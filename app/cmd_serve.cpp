// tandem-cli serve: the model over OpenAI's HTTP API (app/server) until Ctrl-C or SIGTERM.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <pthread.h>
#include <string>
#include <thread>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "server/generation_queue.h"
#include "server/model_text.h"
#include "server/openai_server.h"
#include "tandem/byte_size.h"

namespace {

// SIGINT and SIGTERM go to a thread of their own, which stops the server (the HTTP and engine threads
// then end cleanly); before the server runs they end the program as usual.
class StopOnSignal {
public:
    StopOnSignal() {
        sigemptyset(&signals_);
        sigaddset(&signals_, SIGINT);
        sigaddset(&signals_, SIGTERM);
        // Blocked before any other thread starts, so every thread inherits it and only sigwait sees them.
        pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
        thread_ = std::thread([this] {
            int signal = 0;
            sigwait(&signals_, &signal);
            if (done_) return;
            auto* server = server_.load();
            if (!server) std::_Exit(128 + signal);
            std::fputs("tandem-cli: stopping the server\n", stderr);
            // stop() has no effect before the server's loop has started: repeat until it ends.
            while (!done_) {
                server->stop();
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
            }
        });
    }
    ~StopOnSignal() { finish(); }
    // Ends the thread; after this no signal touches the server.
    void finish() {
        if (!thread_.joinable()) return;
        done_ = true;
        pthread_kill(thread_.native_handle(), SIGTERM);  // wakes sigwait if nothing else did
        thread_.join();
    }
    void serving(tandem::server::OpenAiServer* server) { server_ = server; }

private:
    sigset_t signals_;
    std::atomic<tandem::server::OpenAiServer*> server_{nullptr};
    std::atomic<bool> done_{false};
    std::thread thread_;
};

}  // namespace

int runServe(const CommandArgs& argv) {
    const CliArgs args(argv, {"--model", "--host", "--port", "--api-key", "--name", "--threads", "--context", "--device",
                              "--gpu-memory", "--gpus", "--experts", "--dense", "--kv-cache", "--max-tokens", "--max-body", "--max-requests",
                              "--cache-conversations", "--batch", "--prefill-chunk"});
    tandem::server::ServerOptions o;
    o.host = args.optional("--host").value_or(o.host);
    o.port = args.integer("--port", o.port);
    if (o.port < 0 || o.port > 65535) throw tandem::Error("--port must be from 0 (any free port) to 65535");
    o.apiKey = args.optional("--api-key").value_or("");
    if (o.apiKey.empty())
        if (const char* key = std::getenv("TANDEM_API_KEY")) o.apiKey = key;
    if (args.optional("--api-key") && o.apiKey.empty()) throw tandem::Error("--api-key must not be empty");
    // Checked before the model loads: an open server on the network is never started by accident.
    if (!tandem::server::isLoopbackHost(o.host) && o.apiKey.empty())
        throw tandem::Error("--host " + o.host + " lets other machines reach the server, so it needs an API key: give "
                            "--api-key KEY (or set TANDEM_API_KEY), which clients then send as 'Authorization: Bearer "
                            "KEY'; or serve on 127.0.0.1 (the default)");
    o.maxTokens = args.integer("--max-tokens", o.maxTokens);
    o.maxRequests = args.integer("--max-requests", o.maxRequests);
    o.cachedConversations = args.integer("--cache-conversations", 0);
    if (o.cachedConversations < 0) throw tandem::Error("--cache-conversations must be at least 1 (0: the default)");
    o.batch = args.integer("--batch", 0);
    if (o.batch < 0) throw tandem::Error("--batch must be at least 1 (0: the default, 4 on the CPU and 1 on the GPU)");
    o.prefillChunk = args.integer("--prefill-chunk", -1);
    if (o.prefillChunk < 0 && args.optional("--prefill-chunk"))
        throw tandem::Error("--prefill-chunk must be a number of tokens, or 0 to prefill each prompt whole");
    if (o.maxTokens < 1 || o.maxRequests < 1) throw tandem::Error("--max-tokens and --max-requests must be 1 or more");
    if (const auto size = args.optional("--max-body")) o.maxBodyBytes = tandem::parseByteSize(*size, "--max-body");
    if (o.maxBodyBytes < 1024) throw tandem::Error("--max-body must be at least 1K");
    const std::string modelDir = args.required("--model");
    const auto folderName = std::filesystem::path(modelDir).lexically_normal().parent_path().filename().string();
    const auto modelName = std::filesystem::path(modelDir).lexically_normal().filename().string();
    o.modelName = args.optional("--name").value_or(modelName.empty() ? folderName : modelName);
    if (o.modelName.empty()) throw tandem::Error("give the model a name with --name");

    // A client that closes its connection must not end the server with SIGPIPE: the write fails instead.
    std::signal(SIGPIPE, SIG_IGN);
    StopOnSignal stopOnSignal;

    tandem::EngineOptions options = engineOptions(args);
    // Each generation running at once and each conversation kept holds a session; on the GPU the plan
    // reserves their KV caches before the routed experts' share (the GPU's defaults are one of each).
    options.gpuSessions = std::max({1, o.batch, o.cachedConversations});
    std::fprintf(stderr, "loading %s ...\n", modelDir.c_str());
    auto engine = tandem::Engine::load(modelDir, options);
    reportDevice(engine->info());
    const tandem::server::ModelText text(modelDir, engine->info().modelType);
    if (!text.templateWarning().empty()) std::fprintf(stderr, "note: %s\n", text.templateWarning().c_str());

    tandem::server::OpenAiServer server(*engine, text, o);
    const int port = server.bind();
    const std::string host = o.host.find(':') != std::string::npos && o.host.front() != '[' ? "[" + o.host + "]" : o.host;
    const int batch = o.batch > 0 ? o.batch : engine->info().device == "CPU" ? 4 : 1;
    if (engine->info().device != "CPU" && options.gpuSessions > 1)
        std::fprintf(stderr, "the GPU holds the KV caches of %d sessions of %d tokens (--batch, --cache-conversations)\n",
                     options.gpuSessions, engine->info().contextLength);
    const int chunk = o.prefillChunk >= 0 ? o.prefillChunk : tandem::server::GenerationQueue::defaultPrefillChunk(batch);
    const std::string prefill = chunk > 0 ? "prompts prefilled " + std::to_string(chunk) + " tokens at a time between decode steps"
                                          : "prompts prefilled whole";
    std::fprintf(stderr,
                 "%s on %s, %d tokens of context, up to %d generations decoded together, %s; %s\n"
                 "listening on http://%s:%d (OpenAI API at http://%s:%d/v1: /v1/chat/completions, /v1/completions, "
                 "/v1/models; /health); Ctrl-C stops\n",
                 o.modelName.c_str(), engine->info().device.c_str(), engine->info().contextLength, batch, prefill.c_str(),
                 o.apiKey.empty() ? "no API key (loopback only)" : "API key required", host.c_str(), port, host.c_str(),
                 port);
    stopOnSignal.serving(&server);
    server.run();
    stopOnSignal.finish();
    return 0;
}
