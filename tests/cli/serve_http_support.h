#pragma once
// Talking with tandem-cli serve over HTTP from a test (tst_serve_cli, tst_serve_scheduling): requests with
// cpp-httplib's client, and the server-sent events of a streamed answer. The target defines
// TANDEM_DEFAULT_MODEL_SOURCE (the Pocket Dictionary).
#include <httplib.h>

#include <QFileInfo>
#include <QString>
#include <QtGlobal>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tandem::test {

using Json = nlohmann::json;

inline const QString kModel = QStringLiteral(TANDEM_DEFAULT_MODEL_SOURCE);
inline const std::string kName = QFileInfo(kModel).fileName().toStdString();

struct Reply {
    int status = 0;  // 0: no answer at all
    std::string body;
    std::string contentType;
    Json json() const { return Json::parse(body, nullptr, false); }
};

inline Reply send(int port, httplib::Request req, int readTimeoutSeconds = 300) {
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(readTimeoutSeconds, 0);
    const auto r = client.send(req);
    if (!r) {
        qWarning("request failed: %s", httplib::to_string(r.error()).c_str());
        return {};
    }
    return {r->status, r->body, r->get_header_value("Content-Type")};
}

inline Reply get(int port, const std::string& path, httplib::Headers headers = {}) {
    httplib::Request req;
    req.method = "GET";
    req.path = path;
    req.headers = std::move(headers);
    return send(port, std::move(req));
}

inline Reply post(int port, const std::string& path, const std::string& body, httplib::Headers headers = {}) {
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.headers = std::move(headers);
    req.body = body;
    req.set_header("Content-Type", "application/json");
    return send(port, std::move(req));
}

inline Json chatRequest(const std::string& question, bool stream, int maxTokens = 256) {
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

inline EventStream parseEvents(const std::string& body) {
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
inline std::string joined(const EventStream& s, const std::string& field) {
    std::string text;
    for (const auto& chunk : s.chunks)
        for (const auto& choice : chunk.value("choices", Json::array())) {
            if (field == "text" && choice.contains("text")) text += choice["text"].get<std::string>();
            if (choice.contains("delta") && choice["delta"].contains(field)) text += choice["delta"][field].get<std::string>();
        }
    return text;
}


}  // namespace tandem::test
