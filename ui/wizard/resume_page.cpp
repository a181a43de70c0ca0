#include "ui/wizard/resume_page.h"

#include <QDir>
#include <QLabel>
#include <QRadioButton>
#include <QVBoxLayout>

#include "ui/wizard/model_wizard.h"

namespace tandem::ui {

ResumePage::ResumePage(ModelWizard* wizard)
    : QWizardPage(wizard), wizard_(wizard), summary_(new QLabel(this)), carryOn_(new QRadioButton(this)),
      startOver_(new QRadioButton(tr("Start over with another model"), this)), next_(ModelWizard::ChooseId) {
    setTitle(tr("Carry On Where You Stopped?"));
    summary_->setWordWrap(true);
    carryOn_->setChecked(true);
    carryOn_->setAccessibleName(tr("Carry on"));
    startOver_->setAccessibleName(tr("Start over"));
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(summary_);
    layout->addSpacing(12);
    layout->addWidget(carryOn_);
    layout->addWidget(startOver_);
    layout->addStretch();
    setCommitPage(true);
    setButtonText(QWizard::CommitButton, tr("Continue"));
}

void ResumePage::initializePage() {
    const ModelWizardState s = wizard_->parts().settings->modelWizardState();
    QString where;
    switch (s.stage) {
    case ModelWizardState::Stage::Downloading:
        where = tr("Tandem was downloading %1 into %2. The files downloaded so far are kept; the download carries on "
                   "from where it stopped.")
                    .arg(s.name, QDir::toNativeSeparators(s.sourcePath));
        carryOn_->setText(tr("Carry on downloading %1").arg(s.name));
        break;
    case ModelWizardState::Stage::Converting:
        where = tr("Tandem was converting %1 to %2. The layers converted so far are kept; the conversion carries on "
                   "from where it stopped.")
                    .arg(s.name, s.experts);
        carryOn_->setText(tr("Carry on converting %1").arg(s.name));
        break;
    case ModelWizardState::Stage::Loading:
    case ModelWizardState::Stage::None:
        where = tr("%1 is converted and ready to load from %2.").arg(s.name, QDir::toNativeSeparators(s.storeDir));
        carryOn_->setText(tr("Load %1 and start chatting").arg(s.name));
        break;
    }
    summary_->setText(where);
}

bool ResumePage::validatePage() {
    if (startOver_->isChecked()) {
        wizard_->parts().settings->clearModelWizardState();
        next_ = ModelWizard::ChooseId;
    } else {
        next_ = wizard_->restoreState(wizard_->parts().settings->modelWizardState());
    }
    return true;
}

int ResumePage::nextId() const { return next_; }

}  // namespace tandem::ui
