#include "ui/worker/remote_api.h"

#include <QCoreApplication>
#include <QHostAddress>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkRequest>
#include <cmath>

#include "ui/text/sentence.h"

namespace tandem::ui {
namespace {

const QString kKeyPrefix = QStringLiteral("tandem-remote:");

QString tr(const char* text) { return QCoreApplication::translate("RemoteModel", text); }

std::optional<int> intField(const QJsonObject& o, const char* name) {
    const QJsonValue v = o.value(QLatin1String(name));
    if (!v.isDouble()) return std::nullopt;
    const double d = v.toDouble();
    if (!std::isfinite(d) || d < 0 || d > 2e9) return std::nullopt;
    return static_cast<int>(d);
}

// A text delta's field: a string, or nothing (null, absent).
QString textField(const QJsonObject& o, const char* name) {
    const QJsonValue v = o.value(QLatin1String(name));
    return v.isString() ? v.toString() : QString();
}

void readUsage(const QJsonObject& object, StreamChunk& chunk) {
    const QJsonValue usage = object.value(QLatin1String("usage"));
    if (!usage.isObject()) return;
    const QJsonObject u = usage.toObject();
    chunk.promptTokens = intField(u, "prompt_tokens");
    chunk.completionTokens = intField(u, "completion_tokens");
    const QJsonValue details = u.value(QLatin1String("prompt_tokens_details"));
    if (details.isObject()) chunk.cachedTokens = intField(details.toObject(), "cached_tokens");
}

QString errorText(const QJsonValue& error) {
    if (error.isString()) return error.toString();
    if (error.isObject()) {
        const QJsonObject e = error.toObject();
        if (e.value(QLatin1String("message")).isString()) return e.value(QLatin1String("message")).toString();
        if (e.value(QLatin1String("detail")).isString()) return e.value(QLatin1String("detail")).toString();
        return QString::fromUtf8(QJsonDocument(e).toJson(QJsonDocument::Compact));
    }
    return {};
}

// A short, printable excerpt of what a server sent, for a message.
QString excerpt(const QByteArray& body) {
    QString text = QString::fromUtf8(body.left(160)).simplified();
    if (body.size() > 160) text += QChar(0x2026);
    return text;
}

}  // namespace

QString remoteModelKey(const QString& id) { return kKeyPrefix + id; }
bool isRemoteModelKey(const QString& dir) { return dir.startsWith(kKeyPrefix) && dir.size() > kKeyPrefix.size(); }
QString remoteModelId(const QString& dir) { return isRemoteModelKey(dir) ? dir.mid(kKeyPrefix.size()) : QString(); }

QString remoteUrlProblem(const QString& baseUrl) {
    const QString text = baseUrl.trimmed();
    if (text.isEmpty()) return tr("Enter the server's address, such as http://127.0.0.1:8000/v1.");
    const QUrl url(text, QUrl::StrictMode);
    if (!url.isValid() || url.isRelative())
        return tr("“%1” is not an address: it needs http:// or https:// and the server's name, such as "
                  "http://127.0.0.1:8000/v1.").arg(text);
    if (url.scheme() != QLatin1String("http") && url.scheme() != QLatin1String("https"))
        return tr("“%1” is not an http:// or https:// address.").arg(text);
    if (url.host().isEmpty()) return tr("“%1” names no server: put its name or IP address after %2://.").arg(text, url.scheme());
    if (url.hasQuery() || url.hasFragment()) return tr("“%1” has a query or fragment; give the server's base address only.").arg(text);
    return {};
}

QString remoteApiBase(const QString& baseUrl) {
    QString base = baseUrl.trimmed();
    while (base.endsWith(QLatin1Char('/'))) base.chop(1);
    if (!base.endsWith(QLatin1String("/v1"))) base += QLatin1String("/v1");
    return base;
}

QUrl remoteApiUrl(const QString& baseUrl, const QString& path) { return QUrl(remoteApiBase(baseUrl) + path); }

QString remoteServerName(const QString& baseUrl) {
    const QUrl url(baseUrl.trimmed());
    if (url.host().isEmpty()) return baseUrl.trimmed();
    const QString host = url.host().contains(QLatin1Char(':')) ? QStringLiteral("[%1]").arg(url.host()) : url.host();
    return url.port() > 0 ? QStringLiteral("%1:%2").arg(host).arg(url.port()) : host;
}

QNetworkRequest remoteRequest(const QUrl& url, const QString& apiKey, int timeoutMs) {
    QNetworkRequest request(url);
    request.setHeader(QNetworkRequest::ContentTypeHeader, QStringLiteral("application/json"));
    request.setHeader(QNetworkRequest::UserAgentHeader, QStringLiteral("Tandem"));
    if (!apiKey.trimmed().isEmpty()) request.setRawHeader("Authorization", "Bearer " + apiKey.trimmed().toUtf8());
    request.setTransferTimeout(timeoutMs);
    return request;
}

bool remoteKeyTravelsInClear(const QString& baseUrl, const QString& apiKey) {
    if (apiKey.trimmed().isEmpty()) return false;
    const QUrl url(baseUrl.trimmed());
    if (url.scheme() != QLatin1String("http")) return false;
    const QString host = url.host();
    return host.compare(QLatin1String("localhost"), Qt::CaseInsensitive) != 0 && !QHostAddress(host).isLoopback();
}

QByteArray chatCompletionBody(const QString& model, const GenerationRequest& request) {
    QJsonArray messages;
    // The conversation as role/content messages: the server renders them with its own chat template.
    // Earlier answers' reasoning is not sent back (OpenAI's convention; DeepSeek's API refuses it).
    for (const PromptMessage& m : request.messages)
        messages.append(QJsonObject{{QStringLiteral("role"), m.role}, {QStringLiteral("content"), m.content}});
    QJsonObject body{{QStringLiteral("model"), model},
                     {QStringLiteral("messages"), messages},
                     {QStringLiteral("stream"), true},
                     {QStringLiteral("stream_options"), QJsonObject{{QStringLiteral("include_usage"), true}}},
                     {QStringLiteral("max_tokens"), std::max(1, request.options.maxNewTokens)},
                     // 31 bits: every server takes it (some refuse seeds past a signed 64-bit, or 32-bit, range).
                     {QStringLiteral("seed"), static_cast<qint64>(request.options.sampling.seed & 0x7fffffffu)}};
    if (!request.samplingFromServer) {
        const tandem::SamplingOptions& s = request.options.sampling;
        body.insert(QStringLiteral("temperature"), static_cast<double>(s.temperature));
        body.insert(QStringLiteral("top_p"), static_cast<double>(s.topP));
        // Not OpenAI's, but vLLM, SGLang, llama.cpp and Tandem take them; sent only when they change anything.
        if (s.topK > 0) body.insert(QStringLiteral("top_k"), s.topK);
        if (s.minP > 0) body.insert(QStringLiteral("min_p"), static_cast<double>(s.minP));
        if (s.repetitionPenalty != 1.0f) body.insert(QStringLiteral("repetition_penalty"), static_cast<double>(s.repetitionPenalty));
        if (s.presencePenalty != 0.0f) body.insert(QStringLiteral("presence_penalty"), static_cast<double>(s.presencePenalty));
        if (s.frequencyPenalty != 0.0f) body.insert(QStringLiteral("frequency_penalty"), static_cast<double>(s.frequencyPenalty));
    }
    QStringList stops;
    for (const QString& s : request.stopStrings)
        if (!s.isEmpty()) stops << s;
    if (!stops.isEmpty()) body.insert(QStringLiteral("stop"), QJsonArray::fromStringList(stops));
    return QJsonDocument(body).toJson(QJsonDocument::Compact);
}

QList<QByteArray> SseParser::feed(const QByteArray& bytes) {
    QList<QByteArray> events;
    qsizetype start = 0;
    for (qsizetype i = 0; i < bytes.size(); ++i) {
        if (bytes[i] != '\n') continue;
        line_ += bytes.mid(start, i - start);
        start = i + 1;
        takeLine(std::exchange(line_, {}), events);
    }
    line_ += bytes.mid(start);
    return events;
}

QList<QByteArray> SseParser::finish() {
    QList<QByteArray> events;
    if (!line_.isEmpty()) takeLine(std::exchange(line_, {}), events);
    takeLine({}, events);  // an event the stream ended in, without its blank line
    return events;
}

void SseParser::takeLine(QByteArray line, QList<QByteArray>& events) {
    if (line.endsWith('\r')) line.chop(1);
    if (line.isEmpty()) {  // the end of an event
        if (hasData_) events.append(data_);
        data_.clear();
        hasData_ = false;
        return;
    }
    if (line.startsWith(':')) return;  // a comment (a keep-alive)
    const qsizetype colon = line.indexOf(':');
    const QByteArray field = colon < 0 ? line : line.left(colon);
    if (field != "data") return;  // event, id, retry: nothing the chat needs
    QByteArray value = colon < 0 ? QByteArray() : line.mid(colon + 1);
    if (value.startsWith(' ')) value.remove(0, 1);
    if (hasData_) data_ += '\n';
    data_ += value;
    hasData_ = true;
}

std::optional<StreamChunk> parseStreamChunk(const QByteArray& data) {
    StreamChunk chunk;
    if (data.trimmed() == "[DONE]") {
        chunk.done = true;
        return chunk;
    }
    QJsonParseError parseError;
    const QJsonDocument doc = QJsonDocument::fromJson(data, &parseError);
    if (parseError.error != QJsonParseError::NoError || !doc.isObject()) return std::nullopt;
    const QJsonObject object = doc.object();
    if (object.contains(QLatin1String("error"))) {
        chunk.error = errorText(object.value(QLatin1String("error")));
        if (chunk.error.isEmpty()) chunk.error = tr("an error without a message");
        return chunk;
    }
    readUsage(object, chunk);
    const QJsonValue choices = object.value(QLatin1String("choices"));
    if (choices.isArray() && !choices.toArray().isEmpty()) {
        const QJsonObject choice = choices.toArray().at(0).toObject();
        const QJsonObject delta = choice.value(QLatin1String("delta")).toObject();
        chunk.content = textField(delta, "content");
        chunk.reasoning = textField(delta, "reasoning_content");
        if (chunk.reasoning.isEmpty()) chunk.reasoning = textField(delta, "reasoning");
        chunk.finishReason = textField(choice, "finish_reason");
    } else if (!choices.isArray() && !object.contains(QLatin1String("usage"))) {
        return std::nullopt;  // JSON, but not a chunk
    }
    return chunk;
}

std::optional<StreamChunk> parseCompletion(const QByteArray& body) {
    const QJsonDocument doc = QJsonDocument::fromJson(body);
    if (!doc.isObject()) return std::nullopt;
    const QJsonObject object = doc.object();
    StreamChunk chunk;
    if (object.contains(QLatin1String("error"))) {
        chunk.error = errorText(object.value(QLatin1String("error")));
        return chunk;
    }
    const QJsonValue choices = object.value(QLatin1String("choices"));
    if (!choices.isArray() || choices.toArray().isEmpty()) return std::nullopt;
    const QJsonObject choice = choices.toArray().at(0).toObject();
    const QJsonObject message = choice.value(QLatin1String("message")).toObject();
    chunk.content = textField(message, "content");
    chunk.reasoning = textField(message, "reasoning_content");
    if (chunk.reasoning.isEmpty()) chunk.reasoning = textField(message, "reasoning");
    chunk.finishReason = textField(choice, "finish_reason");
    readUsage(object, chunk);
    return chunk;
}

QString serverErrorMessage(const QByteArray& body) {
    const QJsonDocument doc = QJsonDocument::fromJson(body);
    if (!doc.isObject()) return {};
    const QJsonObject o = doc.object();
    if (o.contains(QLatin1String("error"))) return errorText(o.value(QLatin1String("error")));
    if (o.value(QLatin1String("message")).isString()) return o.value(QLatin1String("message")).toString();
    if (o.contains(QLatin1String("detail"))) {
        const QJsonValue detail = o.value(QLatin1String("detail"));
        return detail.isString() ? detail.toString() : QString::fromUtf8(QJsonDocument(o).toJson(QJsonDocument::Compact));
    }
    return {};
}

QString remoteFailureMessage(RemoteCall call, const RemoteEndpoint& endpoint, QNetworkReply::NetworkError error,
                             const QString& errorString, int status, const QByteArray& body) {
    const QString server = remoteServerName(endpoint.baseUrl);
    const QString said = serverErrorMessage(body);
    const QString saying = said.isEmpty() ? QString() : tr(" It said: “%1”").arg(sentence(said));
    const bool listing = call == RemoteCall::ListModels;
    if (status == 401 || status == 403) {
        if (endpoint.apiKey.trimmed().isEmpty())
            return tr("The server at %1 needs an API key (HTTP %2). Enter the key it was started with (File ▸ Edit Server).%3")
                .arg(server).arg(status).arg(saying);
        return tr("The server at %1 did not accept the API key (HTTP %2). Check the key (File ▸ Edit Server).%3")
            .arg(server).arg(status).arg(saying);
    }
    if (status == 404) {
        if (listing)
            return tr("%1 does not look like an OpenAI-compatible server: %2 was not found (HTTP 404). Check the "
                      "address: vLLM and SGLang usually listen on port 8000 (or 30000), tandem-cli serve on 8080, "
                      "with the API under /v1.%3")
                .arg(server, remoteApiUrl(endpoint.baseUrl, QStringLiteral("/models")).path(), saying);
        return tr("The server at %1 has no model “%2” or no chat API at %3 (HTTP 404). Choose one of the models it lists "
                  "(File ▸ Edit Server).%4")
            .arg(server, endpoint.model, remoteApiUrl(endpoint.baseUrl, QStringLiteral("/chat/completions")).path(), saying);
    }
    if (status >= 400 && status < 500)
        return tr("The server at %1 refused the request (HTTP %2).%3").arg(server).arg(status).arg(saying);
    if (status >= 500)
        return tr("The server at %1 failed (HTTP %2).%3 Try again, or look at the server's log.").arg(server).arg(status).arg(saying);
    if (status >= 300 && status < 400)
        return tr("The server at %1 sent the request elsewhere (HTTP %2); give the address it sends to instead.")
            .arg(server).arg(status);
    switch (error) {
    case QNetworkReply::ConnectionRefusedError:
        return tr("Nothing answers at %1 (connection refused): is the server running, and is the address right?").arg(server);
    case QNetworkReply::HostNotFoundError:
        return tr("The server's name in %1 could not be found: check the address.").arg(endpoint.baseUrl.trimmed());
    case QNetworkReply::TimeoutError:
    case QNetworkReply::OperationCanceledError:  // the transfer timeout; a user's stop never gets here
        return listing ? tr("The server at %1 did not answer within %2 seconds.").arg(server).arg(kRemoteListTimeoutMs / 1000)
                       : tr("The server at %1 sent nothing for %2 minutes, so the answer was given up.")
                             .arg(server).arg(kRemoteStallTimeoutMs / 60000);
    case QNetworkReply::RemoteHostClosedError:
        return listing ? tr("The server at %1 closed the connection without an answer.").arg(server)
                       : tr("The connection to the server at %1 was lost before the answer was complete.").arg(server);
    case QNetworkReply::SslHandshakeFailedError:
        return tr("The secure connection to %1 failed: %2. Is it an https:// server?").arg(server, errorString);
    case QNetworkReply::ProtocolFailure:
    case QNetworkReply::ProtocolUnknownError:
    case QNetworkReply::ProtocolInvalidOperationError:
        return tr("%1 did not answer in HTTP as an OpenAI-compatible server does (%2).").arg(server, errorString);
    default:
        return tr("Could not reach the server at %1: %2.").arg(server, errorString);
    }
}

std::optional<RemoteModelList> parseModelList(const QByteArray& body) {
    const QJsonDocument doc = QJsonDocument::fromJson(body);
    if (!doc.isObject()) return std::nullopt;
    const QJsonValue data = doc.object().value(QLatin1String("data"));
    if (!data.isArray()) return std::nullopt;
    RemoteModelList list;
    for (const QJsonValue& v : data.toArray()) {
        const QJsonObject m = v.toObject();
        const QString id = textField(m, "id");
        if (id.isEmpty()) continue;
        if (!list.ids.contains(id)) list.ids << id;
        if (const auto n = intField(m, "context_length")) list.contextLengths[id] = *n;
        else if (const auto n = intField(m, "max_model_len")) list.contextLengths[id] = *n;
    }
    return list;
}

RemoteModelLister::RemoteModelLister(QNetworkAccessManager* network, QObject* parent) : QObject(parent), network_(network) {
    qRegisterMetaType<RemoteModelList>();
}

RemoteModelLister::~RemoteModelLister() { cancel(); }

void RemoteModelLister::start(const RemoteEndpoint& endpoint, int timeoutMs) {
    cancel();
    endpoint_ = endpoint;
    if (const QString problem = remoteUrlProblem(endpoint.baseUrl); !problem.isEmpty()) {
        // Reported after start() returns, as a network failure is.
        QMetaObject::invokeMethod(this, [this, problem] { emit failed(problem); }, Qt::QueuedConnection);
        return;
    }
    QNetworkRequest request = remoteRequest(remoteApiUrl(endpoint.baseUrl, QStringLiteral("/models")), endpoint.apiKey, timeoutMs);
    reply_ = network_->get(request);
    connect(reply_, &QNetworkReply::finished, this, &RemoteModelLister::onFinished);
}

void RemoteModelLister::cancel() {
    if (!reply_) return;
    QNetworkReply* reply = reply_;
    reply_ = nullptr;
    reply->disconnect(this);
    reply->abort();
    reply->deleteLater();
}

void RemoteModelLister::onFinished() {
    QNetworkReply* reply = reply_;
    if (!reply) return;
    reply_ = nullptr;
    reply->deleteLater();
    const int status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    const QByteArray body = reply->readAll();
    if (reply->error() != QNetworkReply::NoError || status < 200 || status >= 300) {
        emit failed(remoteFailureMessage(RemoteCall::ListModels, endpoint_, reply->error(), reply->errorString(), status, body));
        return;
    }
    const auto list = parseModelList(body);
    const QString server = remoteServerName(endpoint_.baseUrl);
    if (!list) {
        emit failed(tr("%1 answered, but not as an OpenAI-compatible server does: %2 is not a list of models "
                       "({\"data\": [{\"id\": …}]}); it began “%3”. Check the address.")
                        .arg(server, reply->url().path(), excerpt(body)));
        return;
    }
    if (list->ids.isEmpty()) {
        emit failed(tr("The server at %1 lists no models: it has none loaded yet.").arg(server));
        return;
    }
    emit listed(*list);
}

}  // namespace tandem::ui
