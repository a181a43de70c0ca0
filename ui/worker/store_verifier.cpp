#include "ui/worker/store_verifier.h"

#include <QMetaObject>

namespace tandem::ui {

tandem::StoreCheck verifyStoreInBackground(const QString& dir, const std::function<bool(double)>& progress) {
    tandem::VerifyStoreOptions options;
    options.background = true;
    return tandem::verifyStore(dir.toStdString(), progress, options);
}

StoreVerifier::StoreVerifier(StoreVerifyFunction verify, QObject* parent)
    : QObject(parent), verify_(verify ? std::move(verify) : StoreVerifyFunction(verifyStoreInBackground)) {
    qRegisterMetaType<tandem::StoreCheck>();
}

StoreVerifier::~StoreVerifier() {
    cancel();
    for (auto& job : stopping_) job->thread.join();
}

void StoreVerifier::reapStopped() {
    for (auto it = stopping_.begin(); it != stopping_.end();) {
        if ((*it)->done->load()) {
            (*it)->thread.join();  // it has returned: no wait
            it = stopping_.erase(it);
        } else {
            ++it;
        }
    }
}

void StoreVerifier::cancel() {
    if (current_) {
        *current_->stop = true;
        stopping_.push_back(std::move(current_));
    }
    dir_.clear();
    ++generation_;
    reapStopped();
}

void StoreVerifier::start(const QString& dir) {
    cancel();
    dir_ = dir;
    const quint64 generation = generation_;
    current_ = std::make_unique<Job>();
    auto stop = current_->stop;
    auto done = current_->done;
    // Results come back as calls queued to this object: dropped if it is gone (the destructor waits for
    // the thread first) or if another verification started since (generation).
    current_->thread = std::thread([this, dir, generation, stop, done, verify = verify_] {
        auto post = [this](auto&& call) { QMetaObject::invokeMethod(this, std::forward<decltype(call)>(call), Qt::QueuedConnection); };
        try {
            const tandem::StoreCheck result = verify(dir, [&](double fraction) {
                if (stop->load()) return false;
                post([this, dir, generation, fraction] {
                    if (generation == generation_) emit progressed(dir, fraction);
                });
                return true;
            });
            if (!stop->load())
                post([this, dir, generation, result] {
                    if (generation != generation_) return;
                    dir_.clear();
                    emit finished(dir, result);
                });
        } catch (const std::exception& e) {
            const QString message = QString::fromStdString(e.what());
            post([this, dir, generation, message] {
                if (generation != generation_) return;
                dir_.clear();
                emit failed(dir, message);
            });
        }
        *done = true;
    });
}

}  // namespace tandem::ui
