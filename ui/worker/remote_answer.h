#pragma once
// One answer of a model on a server: POST {base}/v1/chat/completions with "stream": true, its server-sent
// events parsed as they arrive into answer text and reasoning (reasoning_content), batched as the
// engine's answers are (the first text at once, then every 40 ms), the decode speed measured from the
// chunks (a content or reasoning delta is a token until the server's usage, sent in the last chunk when
// it honours stream_options.include_usage, gives the count). Stop aborts the request and keeps what
// arrived. Every way it can go wrong (refused, unreachable, a lost connection, an error event, a reply
// that is no event stream) ends in failed() with words for the user; text that arrived before stays.
// Lives on the engine thread; EngineWorker turns its signals into its own.
#include <QElapsedTimer>
#include <QObject>
#include <QPointer>
#include <QTimer>

#include "ui/worker/remote_api.h"

namespace tandem::ui {

class RemoteAnswer : public QObject {
    Q_OBJECT
public:
    RemoteAnswer(QNetworkAccessManager* network, RemoteEndpoint endpoint, GenerationRequest request, int contextLength,
                 QObject* parent = nullptr);
    ~RemoteAnswer() override;

    quint64 requestId() const { return request_.id; }
    void start();
    // The user's stop: the request ends now; what arrived is the answer (finished, stoppedByUser).
    void stop();
    // The model is going (another is loaded): the request ends with failed(`why`).
    void cancel(const QString& why);

signals:
    void textArrived(const QString& answer, const QString& reasoning);
    void liveStatsMeasured(const tandem::ui::LiveEngineStats& stats);
    void finished(const tandem::ui::AnswerStats& stats);
    void failed(const QString& message);

private:
    void onMetaData();
    void onReadyRead();
    void onFinished();
    // Takes one event's data; false when it ends the answer (an error, something unreadable).
    bool takeEvent(const QByteArray& data);
    void take(const StreamChunk& chunk);
    void flushText();
    void reportLive(bool force);
    AnswerStats stats() const;
    // Ends the request (if it is still running) and says `message` once.
    void fail(const QString& message);
    void end();

    QNetworkAccessManager* network_;
    RemoteEndpoint endpoint_;
    GenerationRequest request_;
    int contextLength_ = 0;
    QPointer<QNetworkReply> reply_;
    SseParser parser_;
    bool isEventStream_ = true;  // false: the whole body is read at the end (a JSON completion, an error)
    QByteArray body_;            // such a body, or the first bytes of an event stream (for messages)
    int status_ = 0;
    qint64 received_ = 0;  // bytes of the event stream
    int events_ = 0;
    bool ended_ = false;
    bool stopped_ = false;
    bool sawDone_ = false;
    QString finishReason_;
    QString pendingAnswer_, pendingReasoning_;
    bool shownAny_ = false;
    QTimer flushTimer_;
    QElapsedTimer clock_;       // from the request
    qint64 firstTokenNs_ = -1;  // when the first delta arrived
    qint64 lastLiveMs_ = 0;
    int lastLiveTokens_ = 1;
    int deltas_ = 0;  // content and reasoning deltas: the tokens, unless the server counts them
    std::optional<int> promptTokens_, completionTokens_, cachedTokens_;
};

}  // namespace tandem::ui
