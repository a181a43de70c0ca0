#pragma once
// Which model: one of the curated list, any Hugging Face repository, or a folder or .gguf file on this
// computer; and the folder models go into.
#include <QWizardPage>

#include "ui/wizard/model_catalog.h"

class QLabel;
class QLineEdit;
class QRadioButton;
class QTreeWidget;

namespace tandem::ui {

class ModelWizard;

class ChoosePage : public QWizardPage {
    Q_OBJECT
public:
    explicit ChoosePage(ModelWizard* wizard);

    bool isComplete() const override;
    bool validatePage() override;
    int nextId() const override;

    // For tests: the controls.
    QRadioButton* curatedButton() const { return curated_; }
    QTreeWidget* curatedList() const { return list_; }
    QRadioButton* repositoryButton() const { return repository_; }
    QLineEdit* repositoryEdit() const { return repositoryEdit_; }
    QRadioButton* localButton() const { return local_; }
    QLineEdit* localEdit() const { return localEdit_; }
    QLineEdit* modelsFolderEdit() const { return folderEdit_; }
    QLabel* errorLabel() const { return error_; }

private:
    void fillCuratedList();
    void browseLocalFolder();
    void browseGgufFile();
    void chooseModelsFolder();

    ModelWizard* wizard_;
    QList<CuratedModel> curatedModels_;
    QRadioButton* curated_;
    QTreeWidget* list_;
    QRadioButton* repository_;
    QLineEdit* repositoryEdit_;
    QRadioButton* local_;
    QLineEdit* localEdit_;
    QLineEdit* folderEdit_;
    QLineEdit* token_;
    QLabel* error_;
};

}  // namespace tandem::ui
