#pragma once
// The model switcher at the top of the chat (issue 24, item 4), as LM Studio, Jan and GPT4All have one:
// it shows the model in use, and its list offers the model that ships with Tandem, the models in the
// models folder, the folders loaded before and the models on servers, then "Open Model Folder…", "Get a
// Model…" and "Add a Server…". The list is
// read again from the model controller each time it opens and whenever the model changes.
#include <QComboBox>

namespace tandem::ui {

class ModelController;

class ModelPicker : public QComboBox {
    Q_OBJECT
public:
    // What a row of the list is (Qt::UserRole + 1).
    enum class RowKind { Heading, Model, OpenFolder, GetModel, AddServer };

    explicit ModelPicker(ModelController* model, QWidget* parent = nullptr);

    // Rebuilds the list; the current row is the model in use or loading (none: the placeholder).
    void refresh();
    // The row of the model in `dir`, or -1; the folder of a model row.
    int rowOf(const QString& dir) const;
    QString dirAt(int row) const;
    RowKind kindAt(int row) const;
    // The models listed, in order, by folder name.
    QStringList modelNames() const;

    void showPopup() override;

signals:
    void modelChosen(const QString& dir);
    void openFolderRequested();
    void getModelRequested();
    void addServerRequested();

private:
    void onActivated(int row);
    void addHeading(const QString& text);
    void addModel(const QString& name, const QString& dir, const QString& tooltip);
    void addAction(const QString& text, RowKind kind);
    QString remoteTooltip(const QString& key) const;

    ModelController* model_;
    bool refreshing_ = false;
};

}  // namespace tandem::ui
