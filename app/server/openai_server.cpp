#include "server/openai_server.h"

#include <arpa/inet.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>
#include <strings.h>
#include <sys/socket.h>

#include "server/api_error.h"
#include "server/generation_queue.h"
#include "server/openai_request.h"
#include "tandem/byte_size.h"

namespace tandem::server {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// Generated text is whole UTF-8 characters; anything else a client sent was checked by the parser. Still,
// a reply is never refused for its bytes.
std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

void sendJson(httplib::Response& res, int status, const Json& body) {
    res.status = status;
    res.set_content(dump(body), "application/json");
}

void sendError(httplib::Response& res, const ApiError& e) {
    sendJson(res, e.status(), errorBody(e));
    if (e.status() == 401) res.set_header("WWW-Authenticate", "Bearer");
}

std::string randomId() {
    thread_local std::mt19937_64 random{std::random_device{}()};
    char text[33];
    std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(random()),
                  static_cast<unsigned long long>(random()));
    return text;
}

// The host of a Host header ("localhost:8080", "[::1]:8080") or of an Origin ("http://127.0.0.1:3000").
std::string hostPart(std::string_view value) {
    if (const auto scheme = value.find("://"); scheme != std::string_view::npos) value.remove_prefix(scheme + 3);
    value = value.substr(0, value.find('/'));
    if (value.starts_with('[')) return std::string(value.substr(1, value.find(']') - 1));
    return std::string(value.substr(0, value.find(':')));
}

// A POST whose body was not read: the client is asked to close the connection, so the unread body is not
// taken for its next request.
bool hasBody(const httplib::Request& req) {
    const std::string length = req.get_header_value("Content-Length");
    return (!length.empty() && length != "0") || req.has_header("Transfer-Encoding");
}

}  // namespace

bool isLoopbackHost(const std::string& host) {
    if (strcasecmp(host.c_str(), "localhost") == 0) return true;
    in_addr v4{};
    if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
    std::string bare = host;
    if (bare.size() > 2 && bare.front() == '[' && bare.back() == ']') bare = bare.substr(1, bare.size() - 2);
    in6_addr v6{};
    return inet_pton(AF_INET6, bare.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

bool constantTimeEquals(std::string_view given, std::string_view key) {
    volatile unsigned char diff = given.size() != key.size();
    for (std::size_t i = 0; i < key.size(); ++i)
        diff = diff | static_cast<unsigned char>(key[i] ^ (i < given.size() ? given[i] : 0));
    return diff == 0;
}

struct OpenAiServer::Impl {
    int listeningSocket = -1;  // bind(): the socket the library listens on
    Impl(const ModelInfo& info, const ModelText& text, ServerOptions options, std::shared_ptr<JobQueue> queue)
        : info(info), text(text), options(std::move(options)), queue(std::move(queue)) {
        routes();
    }

    // What one generation request asks for, besides its prompt.
    struct Answer {
        std::shared_ptr<GenerationJob> job;
        std::string id;
        bool chat = true;
        bool stream = false;
        bool includeUsage = false;
    };

    void routes();
    // Refuses what a request may not do before it is routed: a web page of another origin, a Host that
    // is not this machine (DNS rebinding) while no key guards the server, a missing or wrong key.
    void checkAccess(const httplib::Request& req) const;
    std::string readBody(const httplib::Response& res, const httplib::ContentReader& reader) const;
    void checkModel(const std::string& model) const;
    Json modelObject() const;
    Answer submit(const CommonRequest& request, const Prompt& prompt, bool chat,
                  ToolCallFormat toolCalls = ToolCallFormat::None);
    void respond(httplib::Response& res, Answer answer);
    Json chunk(const Answer& a, const Json& choice) const;
    Json usage(const GenerationJob& job) const;

    const ModelInfo info;
    const ModelText& text;
    ServerOptions options;
    std::shared_ptr<JobQueue> queue;
    std::atomic<int> answering{0};  // responses whose content provider has not been released
    httplib::Server http;
    const std::time_t started = std::time(nullptr);
};

void OpenAiServer::Impl::checkAccess(const httplib::Request& req) const {
    if (req.has_header("Origin") && !isLoopbackHost(hostPart(req.get_header_value("Origin"))))
        throw ApiError(403, "requests from web pages of other sites are refused", "", "forbidden_origin");
    if (options.apiKey.empty()) {
        if (req.has_header("Host") && !isLoopbackHost(hostPart(req.get_header_value("Host"))))
            throw ApiError(403, "this server answers requests for localhost only (Host: " + req.get_header_value("Host") + ")",
                           "", "forbidden_host");
        return;
    }
    if (!req.path.starts_with("/v1")) return;
    const std::string authorization = req.get_header_value("Authorization");
    if (authorization.empty())
        throw ApiError(401, "this server needs an API key: send it as 'Authorization: Bearer KEY'", "", "invalid_api_key");
    const bool bearer = authorization.size() > 7 && strncasecmp(authorization.c_str(), "Bearer ", 7) == 0;
    if (!bearer || !constantTimeEquals(std::string_view(authorization).substr(7), options.apiKey))
        throw ApiError(401, "the API key is wrong", "", "invalid_api_key");
}

std::string OpenAiServer::Impl::readBody(const httplib::Response& res, const httplib::ContentReader& reader) const {
    std::string body;
    bool tooLarge = false;
    std::size_t skipped = 0;
    const bool read = reader([&](const char* data, std::size_t size) {
        // Counted as it arrives, so a chunked or compressed body is held to the limit as well. Past it the
        // rest is read and dropped (up to a bound), so the client, still sending, gets the 413 rather
        // than a reset connection.
        if (tooLarge || body.size() + size > options.maxBodyBytes) {
            tooLarge = true;
            skipped += size;
            return skipped <= 4 * options.maxBodyBytes;
        }
        body.append(data, size);
        return true;
    });
    if (tooLarge || res.status == 413)
        throw ApiError(413, "the request body is larger than this server takes (" + formatBytes(options.maxBodyBytes) +
                                "; serve --max-body sets it)",
                       "", "request_too_large");
    if (!read) throw ApiError(400, "the request body could not be read");
    return body;
}

void OpenAiServer::Impl::checkModel(const std::string& model) const {
    if (model != options.modelName)
        throw ApiError(404, "the model '" + model + "' does not exist: this server serves '" + options.modelName + "'",
                       "model", "model_not_found");
}

Json OpenAiServer::Impl::modelObject() const {
    return {{"id", options.modelName},
            {"object", "model"},
            {"created", started},
            {"owned_by", "tandem"},
            {"context_length", info.contextLength}};
}

OpenAiServer::Impl::Answer OpenAiServer::Impl::submit(const CommonRequest& request, const Prompt& prompt, bool chat,
                                                      ToolCallFormat toolCalls) {
    const int context = info.contextLength;
    const int promptTokens = static_cast<int>(prompt.tokens.size());
    if (promptTokens >= context)
        throw ApiError(400, "the prompt has " + std::to_string(promptTokens) + " tokens, but this server's context holds " +
                                std::to_string(context) + " (serve --context sets it, up to the model's " +
                                std::to_string(info.maxContextLength) + ")",
                       chat ? "messages" : "prompt", "context_length_exceeded");
    auto job = std::make_shared<GenerationJob>();
    job->prompt = prompt.tokens;
    job->startsInReasoning = chat && prompt.opensThinking;
    job->separateReasoning = chat;
    job->stops = request.stop;
    job->toolCalls = toolCalls;
    GenerateOptions generate;
    // What the context has room for, when max_tokens asks for more or is not given.
    generate.maxNewTokens = std::min(request.maxTokens.value_or(options.maxTokens), context - promptTokens);
    generate.sampling = request.sampling.apply(info.defaultSampling);
    job->options = chat ? text.chatOptions(generate) : text.completionOptions(generate);

    Answer answer{job, (chat ? "chatcmpl-" : "cmpl-") + randomId(), chat, request.stream, request.includeUsage};
    job->label = answer.id;
    if (!queue->submit(job, options.maxRequests))
        throw ApiError(503, "the server is busy: " + std::to_string(options.maxRequests) +
                                " requests are waiting or running (serve --max-requests); try again later",
                       "", "server_busy");
    return answer;
}

Json OpenAiServer::Impl::usage(const GenerationJob& job) const {
    return {{"prompt_tokens", job.promptTokens},
            {"completion_tokens", job.completionTokens},
            {"total_tokens", job.promptTokens + job.completionTokens},
            {"prompt_tokens_details", {{"cached_tokens", job.cachedTokens}}}};
}

Json OpenAiServer::Impl::chunk(const Answer& a, const Json& choice) const {
    Json j{{"id", a.id},
           {"object", a.chat ? "chat.completion.chunk" : "text_completion"},
           {"created", std::time(nullptr)},
           {"model", options.modelName},
           {"choices", Json::array({choice})}};
    if (a.includeUsage) j["usage"] = nullptr;
    return j;
}

void OpenAiServer::Impl::respond(httplib::Response& res, Answer answer) {
    // Both kinds of answer are written by a content provider on this connection's thread, which takes the
    // text as the engine makes it and, between tokens and while the request waits, watches the connection:
    // a client that went away cancels its generation. A non-streamed answer is one chunk at the end, so
    // its status (200) is sent before the generation has run; if the engine then fails, the body is an
    // error object.
    struct State {
        Answer answer;
        std::string content, reasoning;  // a non-streamed answer, gathered
        Json toolCalls = Json::array();
        bool started = false;
        Clock::time_point lastWrite = Clock::now(), lastCheck = Clock::now();
    };
    auto state = std::make_shared<State>();
    state->answer = std::move(answer);
    const auto provider = [this, state](std::size_t, httplib::DataSink& sink) {
        const Answer& a = state->answer;
        GenerationJob& job = *a.job;
        const auto write = [&](const std::string& s) {
            if (sink.write(s.data(), s.size())) {
                state->lastWrite = Clock::now();
                return true;
            }
            job.cancel();
            return false;
        };
        const auto event = [&](const Json& j) { return write("data: " + dump(j) + "\n\n"); };
        const auto choice = [&](const std::string& text, const Json& finishReason) {
            return Json{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finishReason}};
        };
        const auto delta = [&](Json d, const Json& finishReason) {
            return Json{{"index", 0}, {"delta", std::move(d)}, {"logprobs", nullptr}, {"finish_reason", finishReason}};
        };
        if (a.stream && a.chat && !state->started) {
            state->started = true;
            return event(chunk(a, delta({{"role", "assistant"}, {"content", ""}}, nullptr)));
        }

        const auto update = job.take(std::chrono::milliseconds(100));
        for (const auto& d : update.deltas) {
            if (d.kind == Delta::Kind::ToolCall) {
                // A call comes whole, in one chunk: its id, name and all its arguments.
                Json call{{"index", state->toolCalls.size()},
                          {"id", "call_" + randomId().substr(0, 24)},
                          {"type", "function"},
                          {"function", {{"name", d.text}, {"arguments", d.arguments}}}};
                state->toolCalls.push_back(call);
                if (a.stream && !event(chunk(a, delta({{"tool_calls", Json::array({std::move(call)})}}, nullptr))))
                    return false;
                continue;
            }
            const bool reasoning = d.kind == Delta::Kind::Reasoning;
            if (!a.stream) {
                (reasoning ? state->reasoning : state->content) += d.text;
            } else if (!event(chunk(a, a.chat ? delta({{reasoning ? "reasoning_content" : "content", d.text}}, nullptr)
                                               : choice(d.text, nullptr)))) {
                return false;
            }
        }
        if (!update.finished) {
            const auto now = Clock::now();
            if (now - state->lastCheck >= std::chrono::milliseconds(100)) {
                state->lastCheck = now;
                if (!sink.is_writable()) {  // the client closed the connection
                    job.cancel();
                    return false;
                }
            }
            // A comment line now and then keeps proxies and clients from timing out a request that waits.
            if (a.stream && now - state->lastWrite >= std::chrono::seconds(15)) return write(": waiting\n\n");
            return true;
        }

        if (!job.error.empty()) {
            const Json error = job.errorStatus == 500
                                   ? errorBody(500, "the generation failed: " + job.error, "", "generation_failed")
                                   : errorBody(job.errorStatus, job.error, "", job.errorCode);
            if (a.stream ? !event(error) : !write(dump(error))) return false;
        } else if (a.stream) {
            if (!event(chunk(a, a.chat ? delta(Json::object(), job.finishReason) : choice("", job.finishReason))))
                return false;
            if (a.includeUsage) {
                Json last = chunk(a, nullptr);
                last["choices"] = Json::array();
                last["usage"] = usage(job);
                if (!event(last)) return false;
            }
        } else {
            Json choice0;
            if (a.chat) {
                Json message{{"role", "assistant"}, {"content", state->content}};
                if (!state->reasoning.empty()) message["reasoning_content"] = state->reasoning;
                if (!state->toolCalls.empty()) {
                    if (state->content.empty()) message["content"] = nullptr;
                    for (auto& call : state->toolCalls) call.erase("index");  // a message's calls have none
                    message["tool_calls"] = state->toolCalls;
                }
                choice0 = {{"index", 0}, {"message", std::move(message)}, {"logprobs", nullptr}, {"finish_reason", job.finishReason}};
            } else {
                choice0 = choice(state->content, job.finishReason);
            }
            const Json body{{"id", a.id},
                            {"object", a.chat ? "chat.completion" : "text_completion"},
                            {"created", std::time(nullptr)},
                            {"model", options.modelName},
                            {"choices", Json::array({std::move(choice0)})},
                            {"usage", usage(job)}};
            if (!write(dump(body))) return false;
        }
        if (a.stream && !write("data: [DONE]\n\n")) return false;
        sink.done();
        return true;
    };
    // However the response ends (a write failed, the server stops), the generation is not wanted after it.
    ++answering;
    const auto release = [this, job = state->answer.job](bool) {
        job->cancel();
        --answering;
    };
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    if (state->answer.stream) res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(state->answer.stream ? "text/event-stream" : "application/json", provider, release);
}

void OpenAiServer::Impl::routes() {
    // A thread per connection: generations waiting for the engine hold theirs, and /health, /v1/models and
    // requests refused at once must still find one.
    const int threads = options.maxRequests + 16;
    http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
    http.set_payload_max_length(options.maxBodyBytes);

    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        try {
            checkAccess(req);
            return httplib::Server::HandlerResponse::Unhandled;
        } catch (const ApiError& e) {
            sendError(res, e);
            if (hasBody(req)) res.set_header("Connection", "close");
            return httplib::Server::HandlerResponse::Handled;
        }
    });
    // Anything that ends in an error without a body of ours (no such endpoint, an unreadable request)
    // gets one in OpenAI's shape.
    http.set_error_handler(httplib::Server::Handler([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty() || res.content_provider_) return;
        const std::string message =
            res.status == 404 ? "no such endpoint: " + req.method + " " + req.path +
                                    " (this server has GET /health, GET /v1/models, POST /v1/chat/completions and POST "
                                    "/v1/completions)"
                              : "the request was refused (HTTP " + std::to_string(res.status) + ")";
        res.set_content(dump(errorBody(res.status, message)), "application/json");
    }));
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        sendJson(res, 500, errorBody(500, "internal error"));
    });

    // Runs a handler, answering an ApiError (or an engine Error from what the request holds) in OpenAI's shape.
    const auto guarded = [](httplib::Response& res, const auto& handler) {
        try {
            handler();
        } catch (const ApiError& e) {
            sendError(res, e);
            if (e.status() == 413) res.set_header("Connection", "close");
        } catch (const tandem::Error& e) {
            sendError(res, ApiError(400, e.what()));
        } catch (const std::exception& e) {
            std::fprintf(stderr, "serve: internal error: %s\n", e.what());
            sendError(res, ApiError(500, std::string("internal error: ") + e.what()));
        }
    };

    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
        // decode: the decode steps so far, those that ran several sequences together, the most in one.
        // prefill: the prompt prefills run (whole prompts, or chunks of them between decode steps) and
        // their tokens.
        const auto steps = queue->decodeSteps();
        const auto prefills = queue->prefillChunks();
        sendJson(res, 200,
                 {{"status", "ok"},
                  {"model", options.modelName},
                  {"running", queue->runningCount()},
                  {"waiting", queue->waiting()},
                  {"decode", {{"steps", steps.steps}, {"batched_steps", steps.batched}, {"largest_batch", steps.largest}}},
                  {"prefill", {{"chunks", prefills.chunks}, {"tokens", prefills.tokens}}}});
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
        sendJson(res, 200, {{"object", "list"}, {"data", Json::array({modelObject()})}});
    });
    http.Get(R"(/v1/models/(.+))", [this, guarded](const httplib::Request& req, httplib::Response& res) {
        guarded(res, [&] {
            checkModel(req.matches[1].str());
            sendJson(res, 200, modelObject());
        });
    });
    http.Post("/v1/chat/completions",
              [this, guarded](const httplib::Request&, httplib::Response& res, const httplib::ContentReader& reader) {
                  guarded(res, [&] {
                      const auto request = parseChatRequest(readBody(res, reader), options.maxTokens);
                      checkModel(request.model);
                      // With tools, the model's calls come back as tool_calls rather than as its markup.
                      const auto toolCalls = request.tools.is_null() ? ToolCallFormat::None : text.toolCallFormat();
                      respond(res, submit(request, text.chatPrompt(request), true, toolCalls));
                  });
              });
    http.Post("/v1/completions",
              [this, guarded](const httplib::Request&, httplib::Response& res, const httplib::ContentReader& reader) {
                  guarded(res, [&] {
                      const auto request = parseCompletionRequest(readBody(res, reader), options.maxTokens);
                      checkModel(request.model);
                      respond(res, submit(request, text.completionPrompt(request), false));
                  });
              });
}

OpenAiServer::OpenAiServer(Engine& engine, const ModelText& text, ServerOptions options)
    : impl_(std::make_unique<Impl>(engine.info(), text, std::move(options), std::make_shared<GenerationQueue>(engine, text, options.cachedConversations,
                                                                                      options.batch, options.prefillChunk))) {}

OpenAiServer::OpenAiServer(const ModelInfo& info, const ModelText& text, ServerOptions options,
                           std::shared_ptr<JobQueue> queue)
    : impl_(std::make_unique<Impl>(info, text, std::move(options), std::move(queue))) {}

OpenAiServer::~OpenAiServer() = default;

int OpenAiServer::bind() {
    const auto& o = impl_->options;
    // Debian's cpp-httplib 0.11.4 listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into the
    // library): 50 clients connecting at once overflowed it and some had their connection dropped. The
    // listening socket is noted as it is made (its options, as the library's defaults set them) and
    // listened on again with the system's largest backlog once bound.
    impl_->http.set_socket_options([impl = impl_.get()](socket_t sock) {
        httplib::default_socket_options(sock);
        impl->listeningSocket = sock;
    });
    const int port = o.port == 0 ? impl_->http.bind_to_any_port(o.host) : impl_->http.bind_to_port(o.host, o.port) ? o.port : -1;
    if (port <= 0)
        throw Error("cannot listen on " + o.host + " port " + std::to_string(o.port) +
                    ": another program may be using the port, or the address is not one of this machine's");
    if (impl_->listeningSocket >= 0) ::listen(impl_->listeningSocket, SOMAXCONN);
    return port;
}

void OpenAiServer::run() { impl_->http.listen_after_bind(); }

void OpenAiServer::stop() {
    impl_->http.stop();
    impl_->queue->stop();
}

bool OpenAiServer::drain(std::chrono::milliseconds timeout) {
    const auto until = Clock::now() + timeout;
    while (impl_->answering > 0) {
        if (Clock::now() >= until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

}  // namespace tandem::server
