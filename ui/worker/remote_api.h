#pragma once
// The app's side of OpenAI's HTTP API, for a model on a server (issue 27, "Remote endpoints"): the URLs,
// the request body of a chat completion, server-sent events as they arrive, the chunks they carry, and
// what a failure means in words for the user. RemoteModelLister asks a server which models it has
// (Add a Server's "Test connection", and the check when such a model is chosen); RemoteAnswer
// (remote_answer.h) streams one answer. Qt Network and QJsonDocument only.
#include <QByteArray>
#include <QHash>
#include <QList>
#include <QNetworkReply>
#include <QObject>
#include <QPointer>
#include <QString>
#include <QStringList>
#include <QUrl>
#include <optional>

#include "ui/worker/engine_types.h"

class QNetworkAccessManager;

namespace tandem::ui {

// How long a model listing waits for the server, and how long an answer may go without a byte (a server
// that prefills a long prompt may say nothing for a while; tandem-cli serve sends a comment every 15 s).
constexpr int kRemoteListTimeoutMs = 15000;
constexpr int kRemoteStallTimeoutMs = 300000;

// Why `baseUrl` is no server address (empty, no http/https, no host), or empty when it is one.
QString remoteUrlProblem(const QString& baseUrl);
// The API's base: `baseUrl` without a trailing slash, with "/v1" added unless it ends with it already
// ("http://host:8000" and "http://host:8000/v1/" both give "http://host:8000/v1").
QString remoteApiBase(const QString& baseUrl);
// {api base}/models, {api base}/chat/completions.
QUrl remoteApiUrl(const QString& baseUrl, const QString& path);
// "host:port" of the server, for messages.
QString remoteServerName(const QString& baseUrl);
// A request with JSON content, the API key as a bearer token (none when empty) and `timeoutMs`
// without a byte before it is given up.
QNetworkRequest remoteRequest(const QUrl& url, const QString& apiKey, int timeoutMs);
// Whether the key would cross a network unencrypted: plain http to another computer than this one.
bool remoteKeyTravelsInClear(const QString& baseUrl, const QString& apiKey);

// The body of POST /v1/chat/completions for `request` (streamed, usage asked for in the last chunk):
// role/content messages; temperature, top_p (and top_k, min_p and the penalties when they are set),
// max_tokens, seed and stop mapped from the app's options, unless request.samplingFromServer.
QByteArray chatCompletionBody(const QString& model, const GenerationRequest& request);

// Server-sent events: feed the bytes as they arrive, take the data of each complete event (its data
// lines joined by "\n"); comments, other fields and blank events are skipped. finish() gives an event
// the stream ended in without its blank line.
class SseParser {
public:
    QList<QByteArray> feed(const QByteArray& bytes);
    QList<QByteArray> finish();
    // Bytes of an unfinished line or event; a stream that is all this is no event stream.
    bool hasPartial() const { return !line_.isEmpty() || hasData_; }

private:
    void takeLine(QByteArray line, QList<QByteArray>& events);
    QByteArray line_;
    QByteArray data_;
    bool hasData_ = false;
};

// What one "data:" event of a streamed chat completion says.
struct StreamChunk {
    bool done = false;  // "[DONE]"
    QString content;
    QString reasoning;  // reasoning_content (vLLM, SGLang, DeepSeek, Tandem), or "reasoning" (Ollama, newer vLLM)
    QString finishReason;
    std::optional<int> promptTokens;  // usage, in the last chunk when stream_options.include_usage is honoured
    std::optional<int> completionTokens;
    std::optional<int> cachedTokens;
    QString error;  // an error event ({"error": {...}}) the server sent mid-stream: its message
};
// Parses one event's data; nullopt when it is not JSON of a chunk's shape (an object).
std::optional<StreamChunk> parseStreamChunk(const QByteArray& data);
// The same from a whole, non-streamed chat.completion (a server that ignored "stream": true).
std::optional<StreamChunk> parseCompletion(const QByteArray& body);

// What the server says went wrong in an error body: OpenAI's {"error": {"message"}}, vLLM's older
// {"object": "error", "message"}, FastAPI's {"detail"}, {"error": "..."}; empty when none.
QString serverErrorMessage(const QByteArray& body);

enum class RemoteCall { ListModels, Answer };
// A failed request in words: who did not answer and why (unreachable, refused key, no such model, not
// an OpenAI-compatible server, the server's own error message) and what to do. `status` is the HTTP
// status (0: none arrived).
QString remoteFailureMessage(RemoteCall call, const RemoteEndpoint& endpoint, QNetworkReply::NetworkError error,
                             const QString& errorString, int status, const QByteArray& body);

// The models a server lists, with the context lengths it says (context_length, max_model_len).
struct RemoteModelList {
    QStringList ids;
    QHash<QString, int> contextLengths;
};
// Parses GET /v1/models' body; nullopt when it is not {"data": [{"id": ...}, ...]}.
std::optional<RemoteModelList> parseModelList(const QByteArray& body);

// GET {base}/v1/models, once: listed() or failed() with a message for the user, then nothing more.
// Lives on the thread that calls start() (the UI thread for the dialog, the engine thread for a load).
class RemoteModelLister : public QObject {
    Q_OBJECT
public:
    explicit RemoteModelLister(QNetworkAccessManager* network, QObject* parent = nullptr);
    ~RemoteModelLister() override;
    void start(const RemoteEndpoint& endpoint, int timeoutMs = kRemoteListTimeoutMs);
    void cancel();
    bool isRunning() const { return reply_ != nullptr; }

signals:
    void listed(const tandem::ui::RemoteModelList& models);
    void failed(const QString& message);

private:
    void onFinished();
    QNetworkAccessManager* network_;
    QPointer<QNetworkReply> reply_;
    RemoteEndpoint endpoint_;
};

}  // namespace tandem::ui

Q_DECLARE_METATYPE(tandem::ui::RemoteModelList)
