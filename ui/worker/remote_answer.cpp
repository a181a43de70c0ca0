#include "ui/worker/remote_answer.h"

#include <QCoreApplication>
#include <QNetworkAccessManager>
#include <QNetworkRequest>
#include <utility>

namespace tandem::ui {
namespace {

// As the engine's answers: the first text at once, later text gathered this long; speed every 250 ms.
constexpr int kTextBatchMs = 40;
constexpr qint64 kLiveStatsMs = 250;

QString excerpt(const QByteArray& bytes) {
    QString text = QString::fromUtf8(bytes.left(120)).simplified();
    if (bytes.size() > 120) text += QChar(0x2026);
    return text;
}

}  // namespace

RemoteAnswer::RemoteAnswer(QNetworkAccessManager* network, RemoteEndpoint endpoint, GenerationRequest request,
                           int contextLength, QObject* parent)
    : QObject(parent), network_(network), endpoint_(std::move(endpoint)), request_(std::move(request)),
      contextLength_(contextLength) {
    flushTimer_.setSingleShot(true);
    flushTimer_.setInterval(kTextBatchMs);
    connect(&flushTimer_, &QTimer::timeout, this, &RemoteAnswer::flushText);
}

RemoteAnswer::~RemoteAnswer() {
    if (reply_) {
        reply_->disconnect(this);
        reply_->abort();
        reply_->deleteLater();
    }
}

void RemoteAnswer::start() {
    clock_.start();
    if (const QString problem = remoteUrlProblem(endpoint_.baseUrl); !problem.isEmpty()) {
        QMetaObject::invokeMethod(this, [this, problem] { fail(problem); }, Qt::QueuedConnection);
        return;
    }
    const QNetworkRequest http =
        remoteRequest(remoteApiUrl(endpoint_.baseUrl, QStringLiteral("/chat/completions")), endpoint_.apiKey, kRemoteStallTimeoutMs);
    QNetworkRequest streaming = http;
    streaming.setRawHeader("Accept", "text/event-stream");
    reply_ = network_->post(streaming, chatCompletionBody(endpoint_.model, request_));
    connect(reply_, &QNetworkReply::metaDataChanged, this, &RemoteAnswer::onMetaData);
    connect(reply_, &QNetworkReply::readyRead, this, &RemoteAnswer::onReadyRead);
    connect(reply_, &QNetworkReply::finished, this, &RemoteAnswer::onFinished);
}

void RemoteAnswer::stop() {
    if (ended_) return;
    stopped_ = true;
    end();
    flushText();
    if (deltas_ > 0) reportLive(true);
    emit finished(stats());
}

void RemoteAnswer::cancel(const QString& why) { fail(why); }

void RemoteAnswer::onMetaData() {
    if (!reply_) return;
    status_ = reply_->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    const QString type = reply_->header(QNetworkRequest::ContentTypeHeader).toString();
    // An error's body, or a whole completion from a server that does not stream, is read at the end.
    isEventStream_ = status_ >= 200 && status_ < 300 && !type.contains(QLatin1String("json"), Qt::CaseInsensitive);
}

void RemoteAnswer::onReadyRead() {
    if (!reply_ || ended_) return;
    const QByteArray bytes = reply_->readAll();
    if (!isEventStream_) {
        if (body_.size() < (1 << 20)) body_ += bytes;
        return;
    }
    if (body_.size() < 512) body_ += bytes.left(512 - body_.size());
    received_ += bytes.size();
    const QList<QByteArray> events = parser_.feed(bytes);
    events_ += static_cast<int>(events.size());
    for (const QByteArray& data : events)
        if (!takeEvent(data)) return;
    // Not one event in the first 64 KiB: this is no event stream (an HTML page, say).
    if (events_ == 0 && received_ > 65536)
        fail(tr("The server at %1 did not answer with an event stream as an OpenAI-compatible server does; it sent “%2”.")
                 .arg(remoteServerName(endpoint_.baseUrl), excerpt(body_)));
}

bool RemoteAnswer::takeEvent(const QByteArray& data) {
    const auto chunk = parseStreamChunk(data);
    if (!chunk) {
        fail(tr("The server at %1 sent an event Tandem cannot read (not a chat completion chunk): “%2”.")
                 .arg(remoteServerName(endpoint_.baseUrl), excerpt(data)));
        return false;
    }
    if (!chunk->error.isEmpty()) {
        QString said = chunk->error.trimmed();
        if (!said.endsWith(QLatin1Char('.'))) said += QLatin1Char('.');
        fail(tr("The server at %1 stopped the answer with an error: “%2”").arg(remoteServerName(endpoint_.baseUrl), said));
        return false;
    }
    if (chunk->done) {
        // The answer is complete: nothing after [DONE] matters, and the connection may stay open.
        sawDone_ = true;
        end();
        flushText();
        if (deltas_ > 0) reportLive(true);
        emit finished(stats());
        return false;
    }
    take(*chunk);
    return true;
}

void RemoteAnswer::take(const StreamChunk& chunk) {
    if (chunk.promptTokens) promptTokens_ = chunk.promptTokens;
    if (chunk.completionTokens) completionTokens_ = chunk.completionTokens;
    if (chunk.cachedTokens) cachedTokens_ = chunk.cachedTokens;
    if (!chunk.finishReason.isEmpty()) finishReason_ = chunk.finishReason;
    if (chunk.content.isEmpty() && chunk.reasoning.isEmpty()) return;
    if (deltas_++ == 0) firstTokenNs_ = clock_.nsecsElapsed();
    pendingAnswer_ += chunk.content;
    pendingReasoning_ += chunk.reasoning;
    if (!shownAny_) flushText();
    else if (!flushTimer_.isActive()) flushTimer_.start();
    reportLive(false);
}

void RemoteAnswer::flushText() {
    flushTimer_.stop();
    if (pendingAnswer_.isEmpty() && pendingReasoning_.isEmpty()) return;
    shownAny_ = true;
    emit textArrived(std::exchange(pendingAnswer_, {}), std::exchange(pendingReasoning_, {}));
}

void RemoteAnswer::reportLive(bool force) {
    if (firstTokenNs_ < 0) return;
    const qint64 now = (clock_.nsecsElapsed() - firstTokenNs_) / 1000000;
    if (!force && now - lastLiveMs_ < kLiveStatsMs) return;
    const qint64 spanMs = now - lastLiveMs_;
    const int spanTokens = deltas_ - lastLiveTokens_;
    lastLiveMs_ = now;
    lastLiveTokens_ = deltas_;
    LiveEngineStats live;
    live.generatedTokens = deltas_;
    live.decodeTokensPerSecond = spanMs > 0 && spanTokens > 0 ? spanTokens * 1000.0 / static_cast<double>(spanMs) : 0.0;
    // An answer that arrived in one read still shows a speed: its tokens over the whole request.
    if (force && live.decodeTokensPerSecond <= 0 && deltas_ > 0)
        live.decodeTokensPerSecond = deltas_ / std::max(1e-3, static_cast<double>(clock_.nsecsElapsed()) / 1e9);
    emit liveStatsMeasured(live);
}

AnswerStats RemoteAnswer::stats() const {
    AnswerStats s;
    s.contextLength = contextLength_;
    s.promptTokens = promptTokens_.value_or(0);
    s.promptCounted = promptTokens_.has_value();
    s.reusedTokens = cachedTokens_.value_or(0);
    // The server's count when it gives one (a delta may carry more than one token, or none).
    s.generatedTokens = stopped_ || !completionTokens_ ? deltas_ : *completionTokens_;
    if (firstTokenNs_ >= 0) {
        s.timeToFirstTokenSeconds = static_cast<double>(firstTokenNs_) / 1e9;
        const double decodeSeconds = static_cast<double>(clock_.nsecsElapsed() - firstTokenNs_) / 1e9;
        const double total = std::max(1e-3, static_cast<double>(clock_.nsecsElapsed()) / 1e9);
        // As the engine counts: the tokens after the first over the time after it; an answer that came
        // all at once, its tokens over the whole request.
        s.decodeTokensPerSecond = s.generatedTokens >= 2 && decodeSeconds >= 1e-3 ? (s.generatedTokens - 1) / decodeSeconds
                                  : s.generatedTokens > 0                         ? s.generatedTokens / total
                                                                                  : 0.0;
        if (s.generatedTokens >= 2 && decodeSeconds < 1e-3) s.decodeTokensPerSecond = s.generatedTokens / total;
    }
    s.stoppedAtEos = finishReason_ == QLatin1String("stop");
    s.stoppedByUser = stopped_;
    s.filledContext = finishReason_ == QLatin1String("length") && contextLength_ > 0 && promptTokens_ &&
                      *promptTokens_ + s.generatedTokens >= contextLength_;
    return s;
}

void RemoteAnswer::onFinished() {
    if (ended_ || !reply_) return;
    QNetworkReply* reply = reply_;
    const QNetworkReply::NetworkError error = reply->error();
    const QString errorString = reply->errorString();
    if (status_ == 0) status_ = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    const QByteArray rest = reply->readAll();
    const bool ok = error == QNetworkReply::NoError && status_ >= 200 && status_ < 300;
    if (!ok) {
        if (!isEventStream_ || status_ < 200 || status_ >= 300) body_ += rest;
        fail(remoteFailureMessage(RemoteCall::Answer, endpoint_, error, errorString, status_, body_));
        return;
    }
    if (!isEventStream_) {
        body_ += rest;
        const auto whole = parseCompletion(body_);
        if (!whole) {
            fail(tr("The server at %1 did not answer as an OpenAI-compatible server does: “%2”.")
                     .arg(remoteServerName(endpoint_.baseUrl), excerpt(body_)));
            return;
        }
        if (!whole->error.isEmpty()) {
            fail(tr("The server at %1 could not answer: “%2”.").arg(remoteServerName(endpoint_.baseUrl), whole->error.trimmed()));
            return;
        }
        take(*whole);
        end();
        flushText();
        if (deltas_ > 0) reportLive(true);
        emit finished(stats());
        return;
    }
    QList<QByteArray> events = parser_.feed(rest);
    events += parser_.finish();
    for (const QByteArray& data : events)
        if (!takeEvent(data)) return;  // it ended the answer ([DONE], an error)
    if (finishReason_.isEmpty()) {
        fail(deltas_ == 0 && body_.trimmed().isEmpty()
                 ? tr("The server at %1 closed the connection without an answer.").arg(remoteServerName(endpoint_.baseUrl))
             : deltas_ == 0
                 ? tr("The server at %1 did not answer with an event stream as an OpenAI-compatible server does; it sent “%2”.")
                       .arg(remoteServerName(endpoint_.baseUrl), excerpt(body_))
                 : tr("The connection to the server at %1 ended before the answer was complete.")
                       .arg(remoteServerName(endpoint_.baseUrl)));
        return;
    }
    // A finish_reason without the closing [DONE]: complete all the same.
    end();
    flushText();
    if (deltas_ > 0) reportLive(true);
    emit finished(stats());
}

void RemoteAnswer::fail(const QString& message) {
    if (ended_) return;
    end();
    flushText();  // what arrived stays with the answer
    emit failed(deltas_ > 0 && !message.contains(QLatin1String(" kept")) ? message + tr(" What arrived before is kept.") : message);
}

void RemoteAnswer::end() {
    ended_ = true;
    flushTimer_.stop();
    if (QNetworkReply* reply = reply_) {
        reply_ = nullptr;
        reply->disconnect(this);
        if (reply->isRunning()) reply->abort();
        reply->deleteLater();
    }
}

}  // namespace tandem::ui
