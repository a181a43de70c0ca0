#include "ui/wizard/done_page.h"

#include <QDir>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

#include "ui/controllers/chat_controller.h"
#include "ui/controllers/model_controller.h"
#include "ui/wizard/model_wizard.h"

namespace tandem::ui {

DonePage::DonePage(ModelWizard* wizard)
    : QWizardPage(wizard), wizard_(wizard), status_(new QLabel(this)), retry_(new QPushButton(tr("Try Again"), this)) {
    setTitle(tr("Ready to Chat"));
    status_->setWordWrap(true);
    status_->setAccessibleName(tr("Model status"));
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(status_);
    layout->addWidget(retry_, 0, Qt::AlignLeft);
    layout->addStretch();
    setFinalPage(true);
    connect(retry_, &QPushButton::clicked, this, &DonePage::load);
    ModelController* model = wizard_->parts().model;
    connect(model, &ModelController::modelReady, this, &DonePage::onReady);
    connect(model, &ModelController::loadFailed, this, &DonePage::onFailed);
    // It failed and the model used before is back (or it was no model at all).
    connect(model, &ModelController::switchFailed, this, &DonePage::onFailed);
}

void DonePage::initializePage() {
    const WizardPlan& plan = wizard_->plan();
    dir_ = plan.source == WizardPlan::Source::LocalStore ? plan.localPath : plan.storeFolder;
    loaded_ = false;
    load();
}

void DonePage::load() {
    retry_->setVisible(false);
    status_->setText(tr("Loading %1…").arg(wizard_->plan().name));
    loading_ = true;
    wizard_->parts().chat->stop();  // a load waits for an answer in progress
    if (const QString problem = wizard_->parts().model->loadModelFolder(dir_); !problem.isEmpty()) onFailed(problem);
}

void DonePage::onReady(const ModelSummary& summary) {
    if (!loading_ || QDir(summary.dir).canonicalPath() != QDir(dir_).canonicalPath()) return;
    loading_ = false;
    loaded_ = true;
    wizard_->parts().settings->clearModelWizardState();
    wizard_->parts().chat->newConversation();
    status_->setText(tr("%1 is loaded and a new chat is open. Finish, and ask it anything.").arg(wizard_->plan().name));
    emit completeChanged();
}

void DonePage::onFailed(const QString& message) {
    if (!loading_) return;
    loading_ = false;
    status_->setText(message);
    retry_->setVisible(true);
}

bool DonePage::isComplete() const { return loaded_; }

}  // namespace tandem::ui
