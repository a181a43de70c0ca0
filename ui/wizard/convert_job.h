#pragma once
// One conversion into a packed store (tandem::convertModel) on a thread of its own, reported to the UI
// thread by queued signals. Cancel stops it at the next batch of experts; the store's .partial folder
// stays, and starting the same conversion again resumes it.
#include <QObject>
#include <QString>
#include <atomic>
#include <thread>

#include "tandem/convert.h"

namespace tandem::ui {

class ConvertJob : public QObject {
    Q_OBJECT
public:
    explicit ConvertJob(QObject* parent = nullptr);
    ~ConvertJob() override;  // cancels and waits for the thread; see release() for not waiting

    // Ignored while a conversion runs. threads <= 0: one per hardware thread.
    void start(const QString& source, const QString& storeDir, tandem::ExpertPrecision experts,
               tandem::StoreDense dense = tandem::StoreDense::Checkpoint, int threads = 0);
    void cancel();
    // Cancels and lets the job outlive its owner, so closing the wizard returns at once: the job
    // deletes itself once the conversion stops at its next progress report (the application deletes
    // it, waiting, if it quits first). A conversion started into the same store waits for it.
    void release();
    bool isRunning() const { return running_; }

signals:
    void progressed(const tandem::ConvertProgress& progress);
    void finished(const QString& storeDir);
    void cancelled();
    void failed(const QString& message);

private:
    void join();

    QString storeDir_;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    bool running_ = false;
};

}  // namespace tandem::ui

Q_DECLARE_METATYPE(tandem::ConvertProgress)
