#pragma once
// tandem-cli serve's HTTP side: OpenAI's API over one loaded model, on cpp-httplib (Debian's
// libcpp-httplib-dev; docs/ARCHITECTURE.md says why). GET /health, GET /v1/models, POST
// /v1/chat/completions and /v1/completions, streamed as server-sent events or answered as one JSON.
// Each connection has an HTTP thread; generations wait for the one engine thread (GenerationQueue), which
// decodes several together.
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "server/model_text.h"
#include "tandem/engine.h"

namespace tandem::server {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;                          // 0: any free port (bind() says which)
    std::string apiKey;                       // empty: none asked for, which only a loopback address allows
    std::string modelName;                    // the id clients name the model by
    std::size_t maxBodyBytes = 16u << 20;     // larger request bodies get 413
    int maxTokens = 4096;                     // the most max_tokens a request may ask for
    int maxRequests = 64;                     // generations waiting or running; more get 503
    // Conversations whose KV cache the server keeps (tandem-cli serve's queue): a request continues the
    // one that shares the longest prefix with its prompt, so clients that take turns each prefill only
    // what is new; the least recently used one is recycled. 0: 4 on the CPU path (its cache grows with
    // the conversation), 1 on the GPU (each holds its context's cache in GPU memory).
    int cachedConversations = 0;
    // Generations that decode together (tandem-cli serve's queue, GenerationQueue): each decode step runs
    // the next token of up to this many, reading each routed expert once for all the sequences that chose
    // it (on the CPU path). 0: 4 on the CPU path, 1 on the GPU (whose runner runs a batch's sequences
    // one after another until its batched step is measured there; each also holds its context's cache in
    // GPU memory).
    int batch = 0;
    // The most prompt tokens prefilled between two decode steps (tandem-cli serve's queue): a new request's
    // prompt (after its cached prefix) runs a chunk at a time between the running generations' tokens, so
    // a long prompt does not stall their streams for all of its prefill. 0: the whole prompt at once;
    // < 0: the default, 512 where several generations decode together, else the whole prompt.
    int prefillChunk = -1;
};

// 127.0.0.0/8, ::1 and "localhost": addresses only this machine reaches.
bool isLoopbackHost(const std::string& host);
// Compares an API key in a time that depends only on the key's length, not on where they differ.
bool constantTimeEquals(std::string_view given, std::string_view key);

class JobQueue;

class OpenAiServer {
public:
    // `engine` and `text` must outlive the server; its generations run on an engine thread of its own.
    OpenAiServer(Engine& engine, const ModelText& text, ServerOptions options);
    // The generations run wherever `queue` runs them (the desktop app: on the thread that owns its model);
    // `info` describes that model. `text` must outlive the server.
    OpenAiServer(const ModelInfo& info, const ModelText& text, ServerOptions options, std::shared_ptr<JobQueue> queue);
    ~OpenAiServer();

    // Binds the address and returns the port. Throws tandem::Error when it cannot.
    int bind();
    // Serves until stop(), then returns.
    void run();
    // From any thread: stops accepting connections and cancels the generations.
    void stop();
    // Waits up to `timeout` until no answer is being written (after the queue has ended its jobs, so
    // that their clients get the error before stop() closes the connections). Whether none is left.
    bool drain(std::chrono::milliseconds timeout);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::server
