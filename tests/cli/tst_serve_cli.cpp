// tandem-cli serve as a client meets it over raw HTTP (cpp-httplib's client, no OpenAI library): the
// default model's answers equal tandem-cli chat's, streamed ones are well-formed server-sent events,
// every bad request is a 4xx with an OpenAI error body, and keys and addresses are enforced. Several
// clients at once: tst_serve_scheduling.
#include <httplib.h>

#include <QFileInfo>
#include <QTemporaryDir>
#include <QTest>
#include <memory>
#include <nlohmann/json.hpp>

#include "serve_http_support.h"
#include "serve_test_support.h"
#include "test_support.h"

using namespace tandem::test;

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

};

QTEST_GUILESS_MAIN(ServeCliTest)
#include "tst_serve_cli.moc"
