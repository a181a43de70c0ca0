#pragma once
// Reads a packed store in full (tandem::verifyStore) on a thread of its own, at a low priority so the
// chat goes on meanwhile, and reports progress and the verdict to the UI thread by queued signals.
// Starting another verification, cancel() or destruction stops the one running at its next progress
// report (a tenth of a second); nothing waits for it on the UI thread but the destructor.
#include <QObject>
#include <QString>
#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "tandem/store_check.h"

namespace tandem::ui {

// The verification itself: tandem::verifyStore in the background by default; tests wrap it to hold it
// at a chosen point. progress(fraction) returns false to stop.
using StoreVerifyFunction =
    std::function<tandem::StoreCheck(const QString& dir, const std::function<bool(double)>& progress)>;
tandem::StoreCheck verifyStoreInBackground(const QString& dir, const std::function<bool(double)>& progress);

class StoreVerifier : public QObject {
    Q_OBJECT
public:
    explicit StoreVerifier(StoreVerifyFunction verify = {}, QObject* parent = nullptr);
    ~StoreVerifier() override;  // stops the verifications still running and waits for them

    // Stops a verification in progress and starts one of `dir`.
    void start(const QString& dir);
    void cancel();
    bool isRunning() const { return !dir_.isEmpty(); }
    QString dir() const { return dir_; }

signals:
    void progressed(const QString& dir, double fraction);
    // Verified or Damaged (message, damage and recordProblem as tandem::verifyStore says them).
    void finished(const QString& dir, const tandem::StoreCheck& result);
    // It could not be read at all (the folder is gone, a file missing): why.
    void failed(const QString& dir, const QString& message);

private:
    struct Job {
        std::thread thread;
        std::shared_ptr<std::atomic<bool>> stop = std::make_shared<std::atomic<bool>>(false);
        std::shared_ptr<std::atomic<bool>> done = std::make_shared<std::atomic<bool>>(false);
    };
    void reapStopped();

    StoreVerifyFunction verify_;
    QString dir_;            // of the job running, empty when none
    quint64 generation_ = 0;  // results of an older job are dropped
    std::unique_ptr<Job> current_;
    std::vector<std::unique_ptr<Job>> stopping_;
};

}  // namespace tandem::ui

Q_DECLARE_METATYPE(tandem::StoreCheck)
