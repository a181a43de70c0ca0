// tandem-cli serve with several clients at once: a client that goes away cancels its generation and
// queued requests do not block, streams decoded together equal the same requests run alone (a batch, and
// 50 concurrent clients), and prompts prefilled in chunks between decode steps give the same answers
// without holding the running streams up.
#include <httplib.h>

#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QTest>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "serve_http_support.h"
#include "serve_test_support.h"
#include "test_support.h"

using namespace tandem::test;

class ServeSchedulingTest : public QObject {
    Q_OBJECT

    QTemporaryDir tmp_;
    std::unique_ptr<Serve> pocket_;  // the default model with default options: the answers run alone

    int port() const { return pocket_->port(); }

private slots:
    void initTestCase() {
        QVERIFY(tmp_.isValid());
        pocket_ = std::make_unique<Serve>(QStringList{"--model", kModel}, tmp_.filePath("pocket.log"));
        QVERIFY2(port() > 0, qPrintable(pocket_->log()));
    }

    void cleanupTestCase() { QCOMPARE(pocket_->stop(), 0); }

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

QTEST_GUILESS_MAIN(ServeSchedulingTest)
#include "tst_serve_scheduling.moc"
