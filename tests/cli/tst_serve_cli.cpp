// tandem-cli serve as a client meets it over raw HTTP (cpp-httplib's client, no OpenAI library): the
// default model's answers equal tandem-cli chat's, streamed ones are well-formed server-sent events,
// every bad request is a 4xx with an OpenAI error body, keys and addresses are enforced, a client that
// goes away cancels its generation, concurrent streams equal the same requests run alone, and prompts
// prefilled in chunks between decode steps give the same answers without holding the others up.
#include <httplib.h>

#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QElapsedTimer>
#include <QTest>
#include <atomic>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "serve_test_support.h"
#include "test_support.h"

using namespace tandem::test;
using Json = nlohmann::json;

namespace {

const QString kModel = QStringLiteral(TANDEM_DEFAULT_MODEL_SOURCE);
const std::string kName = QFileInfo(kModel).fileName().toStdString();

struct Reply {
    int status = 0;  // 0: no answer at all
    std::string body;
    std::string contentType;
    Json json() const { return Json::parse(body, nullptr, false); }
};

Reply send(int port, httplib::Request req, int readTimeoutSeconds = 300) {
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(readTimeoutSeconds, 0);
    const auto r = client.send(req);
    if (!r) {
        qWarning("request failed: %s", httplib::to_string(r.error()).c_str());
        return {};
    }
    return {r->status, r->body, r->get_header_value("Content-Type")};
}

Reply get(int port, const std::string& path, httplib::Headers headers = {}) {
    httplib::Request req;
    req.method = "GET";
    req.path = path;
    req.headers = std::move(headers);
    return send(port, std::move(req));
}

Reply post(int port, const std::string& path, const std::string& body, httplib::Headers headers = {}) {
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.headers = std::move(headers);
    req.body = body;
    req.set_header("Content-Type", "application/json");
    return send(port, std::move(req));
}

Json chatRequest(const std::string& question, bool stream, int maxTokens = 256) {
    return {{"model", kName},
            {"messages", Json::array({{{"role", "user"}, {"content", question}}})},
            {"temperature", 0},
            {"max_tokens", maxTokens},
            {"stream", stream}};
}

// A stream of server-sent events as the server wrote it: only "data: ..." events (and comments), each
// JSON but the last, which is [DONE].
struct EventStream {
    std::vector<Json> chunks;
    bool done = false;
    std::string problem;  // empty when well-formed
};

EventStream parseEvents(const std::string& body) {
    EventStream s;
    std::size_t pos = 0;
    while (pos < body.size()) {
        const std::size_t end = body.find("\n\n", pos);
        if (end == std::string::npos) {
            s.problem = "an event does not end with a blank line: " + body.substr(pos);
            return s;
        }
        const std::string event = body.substr(pos, end - pos);
        pos = end + 2;
        if (event.starts_with(":")) continue;  // a comment
        if (!event.starts_with("data: ") || event.find('\n') != std::string::npos) {
            s.problem = "not a single data line: " + event;
            return s;
        }
        if (s.done) {
            s.problem = "an event after [DONE]: " + event;
            return s;
        }
        const std::string data = event.substr(6);
        if (data == "[DONE]") {
            s.done = true;
            continue;
        }
        Json chunk = Json::parse(data, nullptr, false);
        if (chunk.is_discarded() || !chunk.is_object()) {
            s.problem = "not a JSON object: " + data;
            return s;
        }
        s.chunks.push_back(std::move(chunk));
    }
    if (!s.done) s.problem = "the stream does not end with data: [DONE]";
    return s;
}

// The text of a chat stream's deltas (`field` content or reasoning_content), or of a completion stream.
std::string joined(const EventStream& s, const std::string& field) {
    std::string text;
    for (const auto& chunk : s.chunks)
        for (const auto& choice : chunk.value("choices", Json::array())) {
            if (field == "text" && choice.contains("text")) text += choice["text"].get<std::string>();
            if (choice.contains("delta") && choice["delta"].contains(field)) text += choice["delta"][field].get<std::string>();
        }
    return text;
}

}  // namespace

class ServeCliTest : public QObject {
    Q_OBJECT

    QTemporaryDir tmp_;
    std::unique_ptr<Serve> pocket_;  // the default model, shared by the tests that need no options

    int port() const { return pocket_->port(); }

private slots:
    void initTestCase() {
        QVERIFY(tmp_.isValid());
        pocket_ = std::make_unique<Serve>(QStringList{"--model", kModel}, tmp_.filePath("pocket.log"));
        QVERIFY2(port() > 0, qPrintable(pocket_->log()));
    }

    void cleanupTestCase() {
        // SIGTERM ends it cleanly, with exit code 0.
        QCOMPARE(pocket_->stop(), 0);
        QVERIFY2(pocket_->log().contains("stopping the server"), qPrintable(pocket_->log()));
    }

    void healthAndModels() {
        const auto health = get(port(), "/health");
        QCOMPARE(health.status, 200);
        QCOMPARE(health.json().value("status", ""), std::string("ok"));
        const auto models = get(port(), "/v1/models");
        QCOMPARE(models.status, 200);
        QVERIFY2(models.contentType.starts_with("application/json"), models.contentType.c_str());
        const Json list = models.json();
        QCOMPARE(list.value("object", ""), std::string("list"));
        QCOMPARE(list["data"].size(), std::size_t(1));
        QCOMPARE(list["data"][0]["id"].get<std::string>(), kName);
        QCOMPARE(list["data"][0]["object"].get<std::string>(), std::string("model"));
        QCOMPARE(get(port(), "/v1/models/" + kName).status, 200);
        QCOMPARE(get(port(), "/v1/models/gpt-4").status, 404);
    }

    void chatAnswerEqualsTandemCliChat_data() {
        QTest::addColumn<QString>("question");
        QTest::newRow("serendipity") << "What does serendipity mean?";
        QTest::newRow("hello") << "Hello";
    }
    void chatAnswerEqualsTandemCliChat() {
        QFETCH(QString, question);
        const auto reply = post(port(), "/v1/chat/completions", chatRequest(question.toStdString(), false).dump());
        QCOMPARE(reply.status, 200);
        const Json j = reply.json();
        QVERIFY2(j.is_object(), reply.body.c_str());
        QCOMPARE(j["object"].get<std::string>(), std::string("chat.completion"));
        QVERIFY(j["id"].get<std::string>().starts_with("chatcmpl-"));
        QCOMPARE(j["model"].get<std::string>(), kName);
        const Json& choice = j["choices"][0];
        QCOMPARE(choice["message"]["role"].get<std::string>(), std::string("assistant"));
        QCOMPARE(choice["finish_reason"].get<std::string>(), std::string("stop"));
        QVERIFY(!choice["message"].contains("reasoning_content"));  // the Pocket Dictionary does not think
        const std::string answer = choice["message"]["content"].get<std::string>();
        QVERIFY(!answer.empty());
        QCOMPARE(answer, cliAnswer(kModel, question.toStdString(), 256));

        // usage: the prompt is the chat template's rendering, as tandem-cli render-chat makes it.
        const Json messages = Json::array({{{"role", "user"}, {"content", question.toStdString()}}});
        const auto rendered = runCli({"render-chat", "--model", kModel}, QByteArray::fromStdString(messages.dump()));
        const auto ids = runCli({"tokenize", "--model", kModel}, rendered.out);
        const int promptTokens = static_cast<int>(QString::fromUtf8(ids.out).split(' ', Qt::SkipEmptyParts).size());
        const Json& usage = j["usage"];
        QCOMPARE(usage["prompt_tokens"].get<int>(), promptTokens);
        QVERIFY(usage["completion_tokens"].get<int>() > 0);
        QCOMPARE(usage["total_tokens"].get<int>(), promptTokens + usage["completion_tokens"].get<int>());
    }

    void streamedChatIsServerSentEvents() {
        const std::string question = "What does river mean?";
        const auto whole = post(port(), "/v1/chat/completions", chatRequest(question, false).dump()).json();
        Json request = chatRequest(question, true);
        request["stream_options"] = {{"include_usage", true}};
        const auto reply = post(port(), "/v1/chat/completions", request.dump());
        QCOMPARE(reply.status, 200);
        QVERIFY2(reply.contentType.starts_with("text/event-stream"), reply.contentType.c_str());
        const auto s = parseEvents(reply.body);
        QVERIFY2(s.problem.empty(), s.problem.c_str());
        QVERIFY(s.chunks.size() > 3);
        // The role first, then content deltas, then a finish reason, then (include_usage) the usage alone.
        QCOMPARE(s.chunks.front()["choices"][0]["delta"]["role"].get<std::string>(), std::string("assistant"));
        const std::string id = s.chunks.front()["id"].get<std::string>();
        for (const auto& chunk : s.chunks) {
            QCOMPARE(chunk["object"].get<std::string>(), std::string("chat.completion.chunk"));
            QCOMPARE(chunk["id"].get<std::string>(), id);
        }
        const Json& last = s.chunks.back();
        QVERIFY(last["choices"].empty());
        QVERIFY2(last["usage"] == whole["usage"], last.dump().c_str());
        const Json& finish = s.chunks[s.chunks.size() - 2]["choices"][0];
        QCOMPARE(finish["finish_reason"].get<std::string>(), std::string("stop"));
        QCOMPARE(joined(s, "content"), whole["choices"][0]["message"]["content"].get<std::string>());

        // Without stream_options no usage chunk, and no usage key in the chunks.
        const auto plain = parseEvents(post(port(), "/v1/chat/completions", chatRequest(question, true).dump()).body);
        QVERIFY2(plain.problem.empty(), plain.problem.c_str());
        QVERIFY(!plain.chunks.back().contains("usage"));
        QCOMPARE(plain.chunks.back()["choices"][0]["finish_reason"].get<std::string>(), std::string("stop"));
        QCOMPARE(joined(plain, "content"), joined(s, "content"));
    }

    void completionsContinueAPrompt() {
        const std::string question = "What does leather mean?";
        const std::string answer = cliAnswer(kModel, question, 256);
        const Json messages = Json::array({{{"role", "user"}, {"content", question}}});
        const std::string prompt =
            runCli({"render-chat", "--model", kModel}, QByteArray::fromStdString(messages.dump())).out.toStdString();
        const Json request{{"model", kName}, {"prompt", prompt}, {"max_tokens", 256}, {"temperature", 0}};
        const auto reply = post(port(), "/v1/completions", request.dump());
        QCOMPARE(reply.status, 200);
        const Json j = reply.json();
        QCOMPARE(j["object"].get<std::string>(), std::string("text_completion"));
        QCOMPARE(j["choices"][0]["text"].get<std::string>(), answer);  // the model's end-of-text ends it
        QCOMPARE(j["choices"][0]["finish_reason"].get<std::string>(), std::string("stop"));

        Json streamed = request;
        streamed["stream"] = true;
        const auto s = parseEvents(post(port(), "/v1/completions", streamed.dump()).body);
        QVERIFY2(s.problem.empty(), s.problem.c_str());
        QCOMPARE(joined(s, "text"), answer);
        QCOMPARE(s.chunks.back()["choices"][0]["finish_reason"].get<std::string>(), std::string("stop"));

        // The same prompt as token ids.
        const auto ids = runCli({"tokenize", "--model", kModel}, QByteArray::fromStdString(prompt));
        Json byIds = request;
        byIds["prompt"] = Json::array();
        for (const auto& id : QString::fromUtf8(ids.out).split(' ', Qt::SkipEmptyParts)) byIds["prompt"].push_back(id.toInt());
        const auto idsReply = post(port(), "/v1/completions", byIds.dump());
        QCOMPARE(idsReply.status, 200);
        QCOMPARE(idsReply.json()["choices"][0]["text"].get<std::string>(), answer);
    }

    void stopStringsAndMaxTokens() {
        const std::string full = cliAnswer(kModel, "What does river mean?", 256);
        const std::size_t noun = full.find("(noun)");
        QVERIFY2(noun != std::string::npos, full.c_str());

        Json stop = chatRequest("What does river mean?", false);
        stop["stop"] = Json::array({"(noun)", "zzz"});
        const Json stopped = post(port(), "/v1/chat/completions", stop.dump()).json();
        QCOMPARE(stopped["choices"][0]["message"]["content"].get<std::string>(), full.substr(0, noun));
        QCOMPARE(stopped["choices"][0]["finish_reason"].get<std::string>(), std::string("stop"));
        stop["stream"] = true;
        const auto s = parseEvents(post(port(), "/v1/chat/completions", stop.dump()).body);
        QVERIFY2(s.problem.empty(), s.problem.c_str());
        QCOMPARE(joined(s, "content"), full.substr(0, noun));  // not even a part of the stop string

        const Json shortReply = post(port(), "/v1/chat/completions", chatRequest("What does river mean?", false, 3).dump()).json();
        QCOMPARE(shortReply["choices"][0]["finish_reason"].get<std::string>(), std::string("length"));
        QCOMPARE(shortReply["usage"]["completion_tokens"].get<int>(), 3);
        QVERIFY(full.starts_with(shortReply["choices"][0]["message"]["content"].get<std::string>()));

        // A seed makes a sampled answer repeatable.
        Json sampled = chatRequest("What does river mean?", false);
        sampled["temperature"] = 1.0;
        sampled["top_p"] = 0.9;
        sampled["top_k"] = 40;
        sampled["seed"] = 1234;
        const auto a = post(port(), "/v1/chat/completions", sampled.dump()).json();
        const auto b = post(port(), "/v1/chat/completions", sampled.dump()).json();
        QCOMPARE(a["choices"][0]["message"]["content"].get<std::string>(), b["choices"][0]["message"]["content"].get<std::string>());
    }

    // A template that opens <think> in the generation prompt (DeepSeek-R1's): the answer is reasoning until
    // </think>, which the tiny random model never writes, so all of it is reasoning_content.
    // Two clients taking turns, each resending its growing conversation: with kept conversations (the
    // CPU's default, 4) the second turn of each finds its whole first exchange cached
    // (usage.prompt_tokens_details.cached_tokens); with one, the other client's request in between took it.
    void conversationsTakingTurnsKeepTheirCaches_data() {
        QTest::addColumn<int>("conversations");
        QTest::newRow("default (4 on the CPU)") << 0;
        QTest::newRow("one") << 1;
    }
    void conversationsTakingTurnsKeepTheirCaches() {
        QFETCH(int, conversations);
        QStringList args{"--model", kModel};
        if (conversations > 0) args << "--cache-conversations" << QString::number(conversations);
        Serve serve(args, tmp_.filePath(QString("turns-%1.log").arg(conversations)));
        QVERIFY2(serve.port() > 0, qPrintable(serve.log()));
        const auto ask = [&](Json messages) {
            Json request{{"model", kName}, {"messages", messages}, {"temperature", 0}, {"max_tokens", 24}};
            const auto reply = post(serve.port(), "/v1/chat/completions", request.dump());
            return reply.json();
        };
        std::vector<Json> talks{Json::array({{{"role", "user"}, {"content", "What does serendipity mean?"}}}),
                                Json::array({{{"role", "user"}, {"content", "What does ephemeral mean?"}}})};
        std::vector<int> firstPrompt;
        for (auto& talk : talks) {
            const Json j = ask(talk);
            QVERIFY2(j.contains("usage"), j.dump().c_str());
            firstPrompt.push_back(j["usage"]["prompt_tokens"].get<int>());
            talk.push_back({{"role", "assistant"}, {"content", j["choices"][0]["message"]["content"]}});
            talk.push_back({{"role", "user"}, {"content", "And river?"}});
        }
        for (std::size_t i = 0; i < talks.size(); ++i) {
            const Json j = ask(talks[i]);
            const int cached = j["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
            if (conversations == 1)
                QVERIFY2(cached < firstPrompt[i], qPrintable(QString("cached %1 of a first prompt of %2").arg(cached).arg(firstPrompt[i])));
            else
                QVERIFY2(cached >= firstPrompt[i], qPrintable(QString("cached %1 of a first prompt of %2").arg(cached).arg(firstPrompt[i])));
        }
    }

    void reasoningComesApart() {
        const QString model = fixturePath("tiny-deepseekv3-fp8");
        Serve serve({"--model", model}, tmp_.filePath("deepseek.log"));
        QVERIFY2(serve.port() > 0, qPrintable(serve.log()));
        Json request{{"model", "tiny-deepseekv3-fp8"},
                     {"messages", Json::array({{{"role", "user"}, {"content", "hi"}}})},
                     {"temperature", 0},
                     {"max_tokens", 20}};
        const Json j = post(serve.port(), "/v1/chat/completions", request.dump()).json();
        const Json& message = j["choices"][0]["message"];
        QCOMPARE(message["content"].get<std::string>(), std::string());
        const std::string reasoning = message["reasoning_content"].get<std::string>();
        QVERIFY(!reasoning.empty());
        QCOMPARE(reasoning, cliAnswer(model, "hi", 20));  // piped, tandem-cli chat prints reasoning as text
        request["stream"] = true;
        const auto s = parseEvents(post(serve.port(), "/v1/chat/completions", request.dump()).body);
        QVERIFY2(s.problem.empty(), s.problem.c_str());
        QCOMPARE(joined(s, "reasoning_content"), reasoning);
        QCOMPARE(joined(s, "content"), std::string());
    }

    // Tools go through a template that takes them (Qwen3's); the Pocket Dictionary's does not: a 400.
    void toolsGoThroughTheTemplate() {
        const Json tools = Json::array({{{"type", "function"},
                                         {"function",
                                          {{"name", "get_weather"},
                                           {"description", "The weather in a city"},
                                           {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}}});
        Json request = chatRequest("What is the weather in Paris?", false, 8);
        request["tools"] = tools;
        const auto refused = post(port(), "/v1/chat/completions", request.dump());
        QCOMPARE(refused.status, 400);
        QCOMPARE(refused.json()["error"]["code"].get<std::string>(), std::string("tools_not_supported"));
        request["tool_choice"] = "none";  // not offered: answered
        QCOMPARE(post(port(), "/v1/chat/completions", request.dump()).status, 200);

        Serve qwen({"--model", fixturePath("tiny-qwen3moe")}, tmp_.filePath("qwen.log"));
        QVERIFY2(qwen.port() > 0, qPrintable(qwen.log()));
        request["model"] = "tiny-qwen3moe";
        request.erase("tool_choice");
        const auto with = post(qwen.port(), "/v1/chat/completions", request.dump());
        QCOMPARE(with.status, 200);
        // With tools the answer is parsed for calls (tool_calls.cpp); the tiny model's random text makes none.
        const Json withBody = with.json();
        const Json& answer = withBody["choices"][0];
        const std::string finish = answer["finish_reason"].get<std::string>();
        QVERIFY2(finish == "stop" || finish == "length" || finish == "tool_calls", finish.c_str());
        if (finish == "tool_calls") QVERIFY(answer["message"]["tool_calls"].is_array());
        else QVERIFY(answer["message"]["content"].is_string());
        request["stream"] = true;
        const auto streamed = parseEvents(post(qwen.port(), "/v1/chat/completions", request.dump()).body);
        QVERIFY2(streamed.problem.empty(), streamed.problem.c_str());
        request.erase("stream");
        request.erase("tools");
        const auto without = post(qwen.port(), "/v1/chat/completions", request.dump());
        QCOMPARE(without.status, 200);
        // The tool's description is in the prompt.
        QVERIFY(with.json()["usage"]["prompt_tokens"].get<int>() > without.json()["usage"]["prompt_tokens"].get<int>() + 20);
        // A conversation with a tool call and its result renders too.
        request["tools"] = tools;
        request["messages"].push_back({{"role", "assistant"},
                                       {"content", nullptr},
                                       {"tool_calls", Json::array({{{"id", "call_1"},
                                                                    {"type", "function"},
                                                                    {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}})}});
        request["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny, 21 C"}});
        QCOMPARE(post(qwen.port(), "/v1/chat/completions", request.dump()).status, 200);
    }

    void badRequestsGetOpenAiErrors_data() {
        QTest::addColumn<QString>("path");
        QTest::addColumn<QByteArray>("body");
        QTest::addColumn<int>("status");
        QTest::addColumn<QString>("param");
        const QByteArray m = QByteArray::fromStdString(kName);
        const QByteArray hi = R"([{"role":"user","content":"hi"}])";
        const QString chat = "/v1/chat/completions";
        QTest::newRow("not JSON") << chat << QByteArray("{\"model\": ") << 400 << "";
        QTest::newRow("empty body") << chat << QByteArray() << 400 << "";
        QTest::newRow("not an object") << chat << QByteArray("[1, 2]") << 400 << "";
        QTest::newRow("missing model") << chat << "{\"messages\":" + hi + "}" << 400 << "model";
        QTest::newRow("unknown model") << chat << "{\"model\":\"gpt-4\",\"messages\":" + hi + "}" << 404 << "model";
        QTest::newRow("missing messages") << chat << "{\"model\":\"" + m + "\"}" << 400 << "messages";
        QTest::newRow("messages not a list") << chat << "{\"model\":\"" + m + "\",\"messages\":\"hi\"}" << 400 << "messages";
        QTest::newRow("no messages") << chat << "{\"model\":\"" + m + "\",\"messages\":[]}" << 400 << "messages";
        QTest::newRow("message not an object") << chat << "{\"model\":\"" + m + "\",\"messages\":[42]}" << 400 << "messages[0]";
        QTest::newRow("unknown role") << chat << "{\"model\":\"" + m + "\",\"messages\":[{\"role\":\"wizard\",\"content\":\"hi\"}]}"
                                      << 400 << "messages[0].role";
        QTest::newRow("content a number") << chat << "{\"model\":\"" + m + "\",\"messages\":[{\"role\":\"user\",\"content\":7}]}"
                                          << 400 << "messages[0].content";
        QTest::newRow("image content")
            << chat << "{\"model\":\"" + m + "\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]}"
            << 400 << "messages[0].content[0]";
        QTest::newRow("temperature a string") << chat << "{\"model\":\"" + m + "\",\"messages\":" + hi + ",\"temperature\":\"hot\"}"
                                              << 400 << "temperature";
        QTest::newRow("temperature too high") << chat << "{\"model\":\"" + m + "\",\"messages\":" + hi + ",\"temperature\":7}"
                                              << 400 << "temperature";
        QTest::newRow("stream a string") << chat << "{\"model\":\"" + m + "\",\"messages\":" + hi + ",\"stream\":\"yes\"}" << 400
                                         << "stream";
        QTest::newRow("max_tokens fractional") << chat << "{\"model\":\"" + m + "\",\"messages\":" + hi + ",\"max_tokens\":1.5}"
                                               << 400 << "max_tokens";
        QTest::newRow("max_tokens zero") << chat << "{\"model\":\"" + m + "\",\"messages\":" + hi + ",\"max_tokens\":0}" << 400
                                         << "max_tokens";
        QTest::newRow("max_tokens over the limit") << chat << "{\"model\":\"" + m + "\",\"messages\":" + hi + ",\"max_tokens\":1000000}"
                                                   << 400 << "max_tokens";
        QTest::newRow("stop a number") << chat << "{\"model\":\"" + m + "\",\"messages\":" + hi + ",\"stop\":5}" << 400 << "stop";
        QTest::newRow("n of 2") << chat << "{\"model\":\"" + m + "\",\"messages\":" + hi + ",\"n\":2}" << 400 << "n";
        QTest::newRow("logprobs") << chat << "{\"model\":\"" + m + "\",\"messages\":" + hi + ",\"logprobs\":true}" << 400 << "logprobs";
        QTest::newRow("tools not a list") << chat << "{\"model\":\"" + m + "\",\"messages\":" + hi + ",\"tools\":{}}" << 400 << "tools";
        QTest::newRow("nested too deep") << chat << "{\"model\":\"" + m + "\",\"messages\":" + QByteArray("[").repeated(5000) +
                                                        QByteArray("]").repeated(5000) + "}"
                                         << 400 << "";
        QTest::newRow("invalid UTF-8") << chat << "{\"model\":\"" + m + "\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}"
                                       << 400 << "";
        const QString completions = "/v1/completions";
        QTest::newRow("completion without prompt") << completions << "{\"model\":\"" + m + "\"}" << 400 << "prompt";
        QTest::newRow("completion prompt a number") << completions << "{\"model\":\"" + m + "\",\"prompt\":5}" << 400 << "prompt";
        QTest::newRow("completion id outside the vocabulary")
            << completions << "{\"model\":\"" + m + "\",\"prompt\":[1, 99999999]}" << 400 << "prompt";
        QTest::newRow("completion empty prompt") << completions << "{\"model\":\"" + m + "\",\"prompt\":\"\"}" << 400 << "prompt";
        QTest::newRow("no such endpoint") << "/v1/embeddings" << "{\"model\":\"" + m + "\",\"input\":\"hi\"}" << 404 << "";
    }
    void badRequestsGetOpenAiErrors() {
        QFETCH(QString, path);
        QFETCH(QByteArray, body);
        QFETCH(int, status);
        QFETCH(QString, param);
        const auto reply = post(port(), path.toStdString(), body.toStdString());
        QCOMPARE(reply.status, status);
        const Json j = reply.json();
        QVERIFY2(j.is_object() && j.contains("error"), reply.body.c_str());
        const Json& e = j["error"];
        QVERIFY2(e["message"].is_string() && !e["message"].get<std::string>().empty(), reply.body.c_str());
        QCOMPARE(e["type"].get<std::string>(), std::string("invalid_request_error"));
        QVERIFY(e.contains("param") && e.contains("code"));
        if (param.isEmpty())
            QVERIFY2(e["param"].is_null(), reply.body.c_str());
        else
            QCOMPARE(e["param"].get<std::string>(), param.toStdString());
        QCOMPARE(get(port(), "/health").status, 200);  // and the server is still there
    }

    void bodiesOverTheLimitAreRefused() {
        Serve serve({"--model", kModel, "--max-body", "64K"}, tmp_.filePath("limit.log"));
        QVERIFY2(serve.port() > 0, qPrintable(serve.log()));
        const Json big{{"model", kName}, {"messages", Json::array({{{"role", "user"}, {"content", std::string(100000, 'a')}}})}};
        const auto reply = post(serve.port(), "/v1/chat/completions", big.dump());
        QCOMPARE(reply.status, 413);
        QCOMPARE(reply.json()["error"]["code"].get<std::string>(), std::string("request_too_large"));
        // Sent in chunks, without a Content-Length, it is counted as it arrives.
        httplib::Client client("127.0.0.1", serve.port());
        const std::string text = big.dump();
        const auto chunked = client.Post(
            "/v1/chat/completions",
            [&](std::size_t offset, httplib::DataSink& sink) {
                if (offset < text.size()) sink.write(text.data() + offset, std::min<std::size_t>(4096, text.size() - offset));
                else sink.done();
                return true;
            },
            "application/json");
        QVERIFY(chunked);
        QCOMPARE(chunked->status, 413);
        QCOMPARE(get(serve.port(), "/health").status, 200);
        // A prompt longer than the context is a 400 before it is queued.
        Serve small({"--model", kModel, "--context", "64"}, tmp_.filePath("context.log"));
        QVERIFY2(small.port() > 0, qPrintable(small.log()));
        Json longPrompt = chatRequest(std::string(2000, 'x'), false);
        longPrompt["model"] = kName;
        const auto tooLong = post(small.port(), "/v1/chat/completions", longPrompt.dump());
        QCOMPARE(tooLong.status, 400);
        QCOMPARE(tooLong.json()["error"]["code"].get<std::string>(), std::string("context_length_exceeded"));
    }

    void apiKeyIsRequiredWhenSet() {
        Serve serve({"--model", kModel, "--api-key", "s3cret"}, tmp_.filePath("key.log"));
        QVERIFY2(serve.port() > 0, qPrintable(serve.log()));
        QCOMPARE(get(serve.port(), "/health").status, 200);  // for load balancers: no key
        const auto none = get(serve.port(), "/v1/models");
        QCOMPARE(none.status, 401);
        QCOMPARE(none.json()["error"]["code"].get<std::string>(), std::string("invalid_api_key"));
        for (const char* wrong : {"Bearer s3cre", "Bearer s3cret2", "Bearer S3CRET", "s3cret", "Basic s3cret"})
            QCOMPARE(get(serve.port(), "/v1/models", {{"Authorization", wrong}}).status, 401);
        QCOMPARE(get(serve.port(), "/v1/models", {{"Authorization", "Bearer s3cret"}}).status, 200);
        const std::string body = chatRequest("What does river mean?", false).dump();
        QCOMPARE(post(serve.port(), "/v1/chat/completions", body, {{"Authorization", "Bearer nope"}}).status, 401);
        QCOMPARE(post(serve.port(), "/v1/chat/completions", body, {{"Authorization", "Bearer s3cret"}}).status, 200);
    }

    void otherAddressesNeedAKey() {
        const auto refused = runCli({"serve", "--model", kModel, "--host", "0.0.0.0", "--port", "0"});
        QCOMPARE(refused.exitCode, 1);
        QVERIFY2(refused.err.contains("--api-key") && !refused.err.contains("listening"), refused.err.constData());
        QVERIFY2(!refused.err.contains("loading"), refused.err.constData());  // refused before the model loads
        // With a key it serves, on every address.
        Serve serve({"--model", kModel, "--host", "0.0.0.0", "--api-key", "k"}, tmp_.filePath("any.log"));
        QVERIFY2(serve.port() > 0 && serve.log().contains("http://0.0.0.0:"), qPrintable(serve.log()));
        QCOMPARE(get(serve.port(), "/v1/models", {{"Authorization", "Bearer k"}}).status, 200);
        // Without a key, requests naming another host are refused (a web page rebinding its DNS name to
        // 127.0.0.1), and so are those from web pages of other origins.
        QCOMPARE(get(port(), "/v1/models", {{"Host", "attacker.example:80"}}).status, 403);
        QCOMPARE(get(port(), "/v1/models", {{"Origin", "https://attacker.example"}}).status, 403);
        QCOMPARE(get(port(), "/v1/models", {{"Origin", "http://localhost:3000"}}).status, 200);
    }

    // tiny-mixtral's greedy answer runs for thousands of tokens without an end of turn: long enough to
    // watch a request run, another wait behind it (--batch 1: one generation at a time), and both go away.
    void goneClientsCancelAndQueuedRequestsDoNotBlock() {
        Serve serve({"--model", fixturePath("tiny-mixtral"), "--context", "32768", "--max-tokens", "30000", "--batch", "1"},
                    tmp_.filePath("mixtral.log"));
        QVERIFY2(serve.port() > 0, qPrintable(serve.log()));
        const Json body{{"model", "tiny-mixtral"},
                        {"messages", Json::array({{{"role", "user"}, {"content", "hello"}}})},
                        {"temperature", 0},
                        {"max_tokens", 30000},
                        {"stream", true}};
        const auto health = [&] { return get(serve.port(), "/health").json(); };
        // A streams; B waits behind it.
        struct Client {
            std::unique_ptr<httplib::Client> http;
            std::atomic<long> received{0};
            std::thread thread;
            ~Client() {  // a check failed half-way: end the request
                if (!thread.joinable()) return;
                http->stop();
                thread.join();
            }
        };
        Client a, b;
        for (Client* c : {&a, &b}) {
            c->http = std::make_unique<httplib::Client>("127.0.0.1", serve.port());
            c->thread = std::thread([c, &body] {
                httplib::Request req;
                req.method = "POST";
                req.path = "/v1/chat/completions";
                req.body = body.dump();
                req.set_header("Content-Type", "application/json");
                req.content_receiver = [c](const char*, std::size_t n, std::uint64_t, std::uint64_t) {
                    c->received += static_cast<long>(n);
                    return true;
                };
                c->http->send(req);
            });
            if (c == &a) QVERIFY(QTest::qWaitFor([&] { return health()["running"] == 1 && a.received > 2000; }, 60000));
        }
        QVERIFY(QTest::qWaitFor([&] { return health()["waiting"] == 1; }, 60000));
        // While they run and wait, /health and /v1/models answer at once.
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < 5; ++i) {
            QCOMPARE(get(serve.port(), "/health").status, 200);
            QCOMPARE(get(serve.port(), "/v1/models").status, 200);
        }
        QVERIFY(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
        // B goes away while it waits, then A while it streams: both are cancelled, and the engine is free
        // long before A's 30,000 tokens.
        b.http->stop();
        QVERIFY(QTest::qWaitFor([&] { return health()["waiting"] == 0; }, 10000));
        QCOMPARE(health()["running"].get<int>(), 1);
        a.http->stop();
        QVERIFY(QTest::qWaitFor([&] { return health()["running"] == 0; }, 10000));
        a.thread.join();
        b.thread.join();
        QVERIFY(QTest::qWaitFor([&] { return serve.log().contains("cancelled before it started"); }, 10000));
        QVERIFY2(serve.log().contains("cancelled (the client went away)"), qPrintable(serve.log()));
        const QRegularExpression generated("(\\d+) generated at");
        const auto m = generated.match(serve.log());
        QVERIFY2(m.hasMatch() && m.captured(1).toInt() < 30000, qPrintable(serve.log()));

        // A client waiting for a whole (non-streamed) answer that gives up cancels it as well.
        Json whole = body;
        whole["stream"] = false;
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/chat/completions";
        req.body = whole.dump();
        req.set_header("Content-Type", "application/json");
        QCOMPARE(send(serve.port(), req, 1).status, 0);  // gives up after a second
        QVERIFY(QTest::qWaitFor([&] { return serve.log().count("cancelled (the client went away)") == 2; }, 10000));
        QCOMPARE(health()["running"].get<int>(), 0);
    }

    // --batch 4: four greedy streams at once decode together (one decode step for all four, /health's
    // decode counters and the log say so), and each equals its request run alone.
    void batchedStreamsEqualTheirRunAlone() {
        Serve serve({"--model", kModel, "--batch", "4"}, tmp_.filePath("batch.log"));
        QVERIFY2(serve.port() > 0, qPrintable(serve.log()));
        QVERIFY2(serve.log().contains("up to 4 generations decoded together"), qPrintable(serve.log()));
        const std::vector<std::string> words = {"river", "leather", "serendipity", "music"};
        const auto ask = [&](const std::string& word, int maxTokens) {
            return post(serve.port(), "/v1/chat/completions", chatRequest("What does " + word + " mean?", true, maxTokens).dump());
        };
        std::vector<std::string> alone;
        for (const auto& w : words) {
            const auto s = parseEvents(ask(w, 256).body);
            QVERIFY2(s.problem.empty(), s.problem.c_str());
            alone.push_back(joined(s, "content"));
        }
        const auto health = [&] { return get(serve.port(), "/health").json(); };
        QCOMPARE(health()["decode"]["batched_steps"].get<long>(), 0L);  // one at a time so far

        // Each word twice at once, and a fifth request that waits for a free place.
        std::vector<Reply> replies(2 * words.size() + 1);
        std::vector<std::thread> clients;
        for (std::size_t i = 0; i < replies.size(); ++i)
            clients.emplace_back([&, i] { replies[i] = ask(words[i % words.size()], 256); });
        for (auto& t : clients) t.join();
        for (std::size_t i = 0; i < replies.size(); ++i) {
            QCOMPARE(replies[i].status, 200);
            const auto s = parseEvents(replies[i].body);
            QVERIFY2(s.problem.empty(), s.problem.c_str());
            QCOMPARE(joined(s, "content"), alone[i % words.size()]);
        }
        const Json decode = health()["decode"];
        qInfo("decode steps %ld, batched %ld, largest batch %d", decode["steps"].get<long>(), decode["batched_steps"].get<long>(),
              decode["largest_batch"].get<int>());
        QVERIFY(decode["batched_steps"].get<long>() > 0);
        QCOMPARE(decode["largest_batch"].get<int>(), 4);
        QVERIFY2(serve.log().contains("sequences together, done"), qPrintable(serve.log()));
        QCOMPARE(health()["running"].get<int>(), 0);
    }

    // --prefill-chunk 8: four long conversations at once (a few hundred tokens each, their earlier turns
    // resent) are each prefilled 8 tokens at a time between the others' decode steps, and each answer
    // (text, usage, finish reason) equals the same request on the default server, which prefills prompts
    // under 512 tokens whole. /health counts the chunks: one per 8 tokens of each prompt, and a
    // conversation that goes on prefills only what its kept cache lacks.
    void chunkedPrefillAnswersEqualWholePrefill() {
        Serve serve({"--model", kModel, "--batch", "4", "--prefill-chunk", "8"}, tmp_.filePath("chunked.log"));
        QVERIFY2(serve.port() > 0, qPrintable(serve.log()));
        QVERIFY2(serve.log().contains("prompts prefilled 8 tokens at a time between decode steps"), qPrintable(serve.log()));
        const std::vector<std::pair<std::string, std::string>> turns = {
            {"What does river mean?", "A river is a large natural stream of water flowing in a channel to the sea."},
            {"What does leather mean?", "Leather is a material made from the skin of an animal by tanning."},
            {"What does music mean?", "Music is the art of arranging sounds in time to make a composition."},
            {"What does happy mean?", "Happy means feeling or showing pleasure or contentment."},
            {"What does house mean?", "A house is a building for people to live in, usually for one family."},
            {"What does tree mean?", "A tree is a woody plant with a single main stem or trunk."}};
        const std::vector<std::string> words = {"serendipity", "water", "ephemeral", "garden"};
        // Conversation i: the earlier turns from the i-th on (so that no two share more than the template's
        // opening), then the question about words[i].
        const auto conversation = [&](std::size_t i) {
            Json messages = Json::array();
            for (std::size_t t = 0; t < turns.size(); ++t) {
                const auto& [question, answer] = turns[(i + t) % turns.size()];
                messages.push_back({{"role", "user"}, {"content", question}});
                messages.push_back({{"role", "assistant"}, {"content", answer}});
            }
            messages.push_back({{"role", "user"}, {"content", "What does " + words[i] + " mean?"}});
            return messages;
        };
        const auto ask = [](int port, const Json& messages) {
            const Json request{{"model", kName}, {"messages", messages}, {"temperature", 0}, {"max_tokens", 64}};
            return post(port, "/v1/chat/completions", request.dump()).json();
        };
        const auto health = [&] { return get(serve.port(), "/health").json(); };
        // What must come back: the answer, its usage less the cache, and how it ended.
        const auto answer = [](const Json& j) {
            return j["choices"][0]["message"]["content"].dump() + " " + j["choices"][0]["finish_reason"].dump() + " " +
                   std::to_string(j["usage"]["prompt_tokens"].get<int>()) + "+" + std::to_string(j["usage"]["completion_tokens"].get<int>());
        };
        std::vector<Json> alone;
        for (std::size_t i = 0; i < words.size(); ++i) {
            alone.push_back(ask(port(), conversation(i)));
            QVERIFY2(alone.back().contains("usage"), alone.back().dump().c_str());
            const int tokens = alone.back()["usage"]["prompt_tokens"].get<int>();
            QVERIFY2(tokens > 100 && tokens < 512, qPrintable(QString::number(tokens)));  // many chunks here, one there
        }
        QCOMPARE(health()["prefill"]["chunks"].get<long>(), 0L);

        std::vector<Json> replies(words.size());
        std::vector<std::thread> clients;
        for (std::size_t i = 0; i < words.size(); ++i) clients.emplace_back([&, i] { replies[i] = ask(serve.port(), conversation(i)); });
        for (auto& t : clients) t.join();
        long chunks = 0, tokens = 0;
        for (std::size_t i = 0; i < words.size(); ++i) {
            QVERIFY2(replies[i].contains("usage"), replies[i].dump().c_str());
            QCOMPARE(answer(replies[i]), answer(alone[i]));
            QCOMPARE(replies[i]["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
            const int prompt = replies[i]["usage"]["prompt_tokens"].get<int>();
            chunks += (prompt + 7) / 8;
            tokens += prompt;
        }
        Json prefill = health()["prefill"];
        qInfo("%ld prefill chunks of %ld tokens; decode: %s", prefill["chunks"].get<long>(), prefill["tokens"].get<long>(),
              health()["decode"].dump().c_str());
        QCOMPARE(prefill["chunks"].get<long>(), chunks);
        QCOMPARE(prefill["tokens"].get<long>(), tokens);
        QVERIFY(health()["decode"]["batched_steps"].get<long>() > 0);

        // The first conversation goes on: only the new turn (and the token before it) is prefilled, in chunks.
        Json more = conversation(0);
        more.push_back({{"role", "assistant"}, {"content", replies[0]["choices"][0]["message"]["content"]}});
        more.push_back({{"role", "user"}, {"content", "And what does music mean?"}});
        const Json want = ask(port(), more);
        const Json next = ask(serve.port(), more);
        QVERIFY2(next.contains("usage"), next.dump().c_str());
        QCOMPARE(answer(next), answer(want));
        const int cached = next["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
        const int rest = next["usage"]["prompt_tokens"].get<int>() - cached;
        QVERIFY2(cached >= replies[0]["usage"]["prompt_tokens"].get<int>(), qPrintable(QString::number(cached)));
        prefill = health()["prefill"];
        QCOMPARE(prefill["chunks"].get<long>(), chunks + (rest + 7) / 8);
        QCOMPARE(prefill["tokens"].get<long>(), tokens + rest);
        QVERIFY(QTest::qWaitFor([&] { return health()["running"] == 0; }, 10000));
    }

    // A short request that comes while a long prompt (about 10,000 tokens, 16 at a time) is being
    // prefilled is prefilled in its turn and answered while the long prompt is still being prefilled: the
    // chunks run by then are fewer than the long prompt needs, and the long request has had no token. Its
    // client then goes away: the prefill stops at a chunk's end, the engine is free, and the prompt's tokens
    // run so far stay cached for the request sent again, which finishes the prefill from there.
    void aShortRequestIsNotHeldUpByALongPrefill() {
        Serve serve({"--model", fixturePath("tiny-mixtral"), "--context", "32768", "--batch", "4", "--prefill-chunk", "16",
                     "--cache-conversations", "1"},
                    tmp_.filePath("mixtral-chunked.log"));
        QVERIFY2(serve.port() > 0, qPrintable(serve.log()));
        const auto health = [&] { return get(serve.port(), "/health").json(); };
        const Json shortRequest{{"model", "tiny-mixtral"},
                                {"messages", Json::array({{{"role", "user"}, {"content", "river"}}})},
                                {"temperature", 0},
                                {"max_tokens", 8}};
        const Json alone = post(serve.port(), "/v1/chat/completions", shortRequest.dump()).json();
        QVERIFY2(alone.contains("usage"), alone.dump().c_str());
        QCOMPARE(alone["usage"]["completion_tokens"].get<int>(), 8);
        const long before = health()["prefill"]["chunks"].get<long>();

        std::string text;
        for (int i = 0; i < 2500; ++i) text += "hello ";
        Json longRequest{{"model", "tiny-mixtral"}, {"prompt", text}, {"temperature", 0}, {"max_tokens", 4}, {"stream", true}};
        httplib::Client longClient("127.0.0.1", serve.port());
        std::atomic<long> received{0};
        std::thread longThread([&] {
            httplib::Request req;
            req.method = "POST";
            req.path = "/v1/completions";
            req.body = longRequest.dump();
            req.set_header("Content-Type", "application/json");
            req.content_receiver = [&](const char*, std::size_t n, std::uint64_t, std::uint64_t) {
                received += static_cast<long>(n);
                return true;
            };
            longClient.send(req);
        });
        struct Join {
            httplib::Client& client;
            std::thread& thread;
            ~Join() {  // a check failed half-way: end the request
                if (!thread.joinable()) return;
                client.stop();
                thread.join();
            }
        } join{longClient, longThread};
        QVERIFY(QTest::qWaitFor([&] { return health()["prefill"]["chunks"].get<long>() >= before + 20; }, 60000));
        const Json during = post(serve.port(), "/v1/chat/completions", shortRequest.dump()).json();
        const long chunksBySoon = health()["prefill"]["chunks"].get<long>() - before;
        const long receivedBySoon = received;
        QVERIFY2(during.contains("usage"), during.dump().c_str());
        QCOMPARE(during["choices"][0]["message"]["content"].get<std::string>(), alone["choices"][0]["message"]["content"].get<std::string>());
        QCOMPARE(during["choices"][0]["finish_reason"].get<std::string>(), std::string("length"));
        QCOMPARE(during["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);  // the long one took its cache
        QCOMPARE(receivedBySoon, 0L);
        // The short job is released just after its answer is handed on; the long one still runs.
        QVERIFY(QTest::qWaitFor([&] { return health()["running"] == 1; }, 10000));

        // The long request goes away half-way through its prefill.
        longClient.stop();
        QVERIFY(QTest::qWaitFor([&] { return health()["running"] == 0; }, 10000));
        longThread.join();
        QVERIFY(QTest::qWaitFor([&] { return serve.log().contains("cancelled (the client went away)"); }, 10000));
        const QRegularExpression line("\\ncmpl-[0-9a-f]+: (\\d+) prompt tokens \\((\\d+) reused\\), 0 generated.*cancelled");
        const auto m = line.match(serve.log());
        QVERIFY2(m.hasMatch(), qPrintable(serve.log()));
        const int longPrompt = m.captured(1).toInt(), longReused = m.captured(2).toInt();
        const long longChunks = (longPrompt - longReused + 15) / 16;
        const int shortPrompt = during["usage"]["prompt_tokens"].get<int>();
        const long ran = health()["prefill"]["chunks"].get<long>() - before - (shortPrompt + 15) / 16;  // the long one's
        qInfo("the short request was answered after %ld chunks; the long prompt of %d tokens needed %ld, ran %ld",
              chunksBySoon, longPrompt, longChunks, ran);
        QVERIFY(chunksBySoon < longChunks);
        QVERIFY(ran < longChunks);

        // Sent again, it continues from the tokens its first try prefilled.
        longRequest["stream"] = false;
        const Json again = post(serve.port(), "/v1/completions", longRequest.dump()).json();
        QVERIFY2(again.contains("usage"), again.dump().c_str());
        QCOMPARE(again["usage"]["prompt_tokens"].get<int>(), longPrompt);
        QCOMPARE(again["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), static_cast<int>(longReused + ran * 16));
        QCOMPARE(again["usage"]["completion_tokens"].get<int>(), 4);
        QCOMPARE(again["choices"][0]["finish_reason"].get<std::string>(), std::string("length"));
    }

    // Three of tiny-mixtral's endless answers decoding together: a client that goes away ends its own
    // generation only; the others keep streaming until they go too.
    void aClientLeavingABatchEndsOnlyItsGeneration() {
        Serve serve({"--model", fixturePath("tiny-mixtral"), "--context", "32768", "--max-tokens", "30000", "--batch", "4"},
                    tmp_.filePath("mixtral-batch.log"));
        QVERIFY2(serve.port() > 0, qPrintable(serve.log()));
        const auto health = [&] { return get(serve.port(), "/health").json(); };
        struct Client {
            std::unique_ptr<httplib::Client> http;
            std::atomic<long> received{0};
            std::thread thread;
            ~Client() {
                if (!thread.joinable()) return;
                http->stop();
                thread.join();
            }
        };
        std::vector<std::unique_ptr<Client>> clients;
        const std::vector<std::string> words{"hello", "river", "music"};
        for (const auto& word : words) {
            auto c = std::make_unique<Client>();
            c->http = std::make_unique<httplib::Client>("127.0.0.1", serve.port());
            Client* raw = c.get();
            const Json body{{"model", "tiny-mixtral"},
                            {"messages", Json::array({{{"role", "user"}, {"content", word}}})},
                            {"temperature", 0},
                            {"max_tokens", 30000},
                            {"stream", true}};
            c->thread = std::thread([raw, request = body.dump()] {
                httplib::Request req;
                req.method = "POST";
                req.path = "/v1/chat/completions";
                req.body = request;
                req.set_header("Content-Type", "application/json");
                req.content_receiver = [raw](const char*, std::size_t n, std::uint64_t, std::uint64_t) {
                    raw->received += static_cast<long>(n);
                    return true;
                };
                raw->http->send(req);
            });
            clients.push_back(std::move(c));
        }
        QVERIFY(QTest::qWaitFor([&] { return health()["running"] == 3 && health()["decode"]["largest_batch"] == 3; }, 60000));
        clients[0]->http->stop();
        QVERIFY(QTest::qWaitFor([&] { return health()["running"] == 2; }, 10000));
        const long before1 = clients[1]->received, before2 = clients[2]->received;
        QVERIFY(QTest::qWaitFor([&] { return clients[1]->received > before1 + 1000 && clients[2]->received > before2 + 1000; }, 10000));
        QCOMPARE(serve.log().count("cancelled (the client went away)"), 1);
        for (std::size_t i = 1; i < clients.size(); ++i) clients[i]->http->stop();
        QVERIFY(QTest::qWaitFor([&] { return health()["running"] == 0; }, 10000));
        for (auto& c : clients) c->thread.join();
        QVERIFY(QTest::qWaitFor([&] { return serve.log().count("cancelled (the client went away)") == 3; }, 10000));
    }

    void concurrentStreamsEqualTheirRunAlone() {
        const std::vector<std::string> words = {"river", "leather", "serendipity", "happy", "house", "music", "water", "tree"};
        const auto ask = [&](const std::string& word) {
            return post(port(), "/v1/chat/completions", chatRequest("What does " + word + " mean?", true).dump());
        };
        std::vector<std::string> alone;
        for (const auto& w : words) {
            const auto s = parseEvents(ask(w).body);
            QVERIFY2(s.problem.empty(), s.problem.c_str());
            alone.push_back(joined(s, "content"));
        }
        // Issue 27's load test: 50 clients streaming at once, each the same as its request alone (greedy).
        constexpr std::size_t kClients = 50;
        std::vector<Reply> replies(kClients);
        std::vector<std::thread> clients;
        QElapsedTimer timer;
        timer.start();
        for (std::size_t i = 0; i < kClients; ++i) clients.emplace_back([&, i] { replies[i] = ask(words[i % words.size()]); });
        for (auto& t : clients) t.join();
        qInfo("%zu concurrent streams in %.1f s", kClients, timer.elapsed() / 1000.0);
        for (std::size_t i = 0; i < kClients; ++i) {
            QCOMPARE(replies[i].status, 200);
            const auto s = parseEvents(replies[i].body);
            QVERIFY2(s.problem.empty(), s.problem.c_str());
            QCOMPARE(s.chunks.back()["choices"][0]["finish_reason"].get<std::string>(), std::string("stop"));
            QCOMPARE(joined(s, "content"), alone[i % words.size()]);
        }
    }
};

QTEST_GUILESS_MAIN(ServeCliTest)
#include "tst_serve_cli.moc"
