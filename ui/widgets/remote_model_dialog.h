#pragma once
// Add a Server… / Edit Server…: a model on another computer, spoken to over OpenAI's API (a vLLM or
// SGLang deployment, another Tandem's `tandem-cli serve`). The user gives it a name, the server's
// address and, if the server wants one, an API key (typed masked, never shown); "Test connection" asks
// the server for its models (GET /v1/models) and lists them to choose from, or says clearly why it could
// not (nothing answers, the key is refused, not an OpenAI-compatible server).
#include <QDialog>

#include "ui/worker/engine_types.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QNetworkAccessManager;
class QPushButton;

namespace tandem::ui {

class RemoteModelLister;
struct RemoteModelList;

class RemoteModelDialog : public QDialog {
    Q_OBJECT
public:
    // `endpoint`: the model to edit (with a Remove button); an invalid one: a new model.
    explicit RemoteModelDialog(const RemoteEndpoint& endpoint, QWidget* parent = nullptr);
    ~RemoteModelDialog() override;

    // What was entered (the id of the model edited; none for a new one). The name defaults to the model id.
    RemoteEndpoint endpoint() const;
    // Remove was pressed (the dialog was accepted).
    bool removeRequested() const { return remove_; }
    // Why OK cannot be taken now, or empty.
    QString problem() const;

    // For tests and screen readers: the line under Test Connection, and the models it listed.
    QString statusText() const;
    QStringList listedModels() const { return listed_; }
    bool isTesting() const;

public slots:
    void testConnection();
    void accept() override;

signals:
    // A test ended: `ok` when the server listed its models.
    void tested(bool ok);

private:
    void onListed(const RemoteModelList& models);
    void onFailed(const QString& message);
    void setStatus(const QString& text, bool error);
    void updateKeyWarning();

    RemoteEndpoint original_;
    QLineEdit* name_;
    QLineEdit* url_;
    QLineEdit* key_;
    QComboBox* model_;
    QPushButton* test_;
    QLabel* status_;
    QLabel* keyWarning_;
    QLabel* problem_;
    QNetworkAccessManager* network_;
    RemoteModelLister* lister_;
    QStringList listed_;
    bool remove_ = false;
};

}  // namespace tandem::ui
