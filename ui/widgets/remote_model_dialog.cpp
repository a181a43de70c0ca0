#include "ui/widgets/remote_model_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QNetworkAccessManager>
#include <QPushButton>
#include <QVBoxLayout>

#include "ui/worker/remote_api.h"

namespace tandem::ui {
namespace {

QLabel* hint(const QString& text, QWidget* parent) {
    auto* label = new QLabel(text, parent);
    label->setWordWrap(true);
    label->setObjectName(QStringLiteral("hint"));
    return label;
}

}  // namespace

RemoteModelDialog::RemoteModelDialog(const RemoteEndpoint& endpoint, QWidget* parent)
    : QDialog(parent), original_(endpoint), name_(new QLineEdit(endpoint.name, this)), url_(new QLineEdit(endpoint.baseUrl, this)),
      key_(new QLineEdit(endpoint.apiKey, this)), model_(new QComboBox(this)), test_(new QPushButton(tr("&Test Connection"), this)),
      status_(new QLabel(this)), keyWarning_(new QLabel(this)), problem_(new QLabel(this)),
      network_(new QNetworkAccessManager(this)), lister_(new RemoteModelLister(network_, this)) {
    setObjectName(QStringLiteral("remoteModelDialog"));
    setWindowTitle(endpoint.isValid() ? tr("Edit Server") : tr("Add a Server"));
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(hint(tr("Chat with a model that runs on another computer: a vLLM or SGLang deployment, another "
                              "Tandem (tandem-cli serve), or any server with OpenAI's chat API."),
                           this));

    auto* form = new QFormLayout;
    name_->setAccessibleName(tr("Name"));
    name_->setPlaceholderText(tr("The model's id"));
    form->addRow(tr("&Name:"), name_);
    url_->setAccessibleName(tr("Server address"));
    url_->setPlaceholderText(QStringLiteral("http://127.0.0.1:8000/v1"));
    url_->setToolTip(tr("The server's base address; /v1 is added when it is not there. vLLM and SGLang listen on port "
                        "8000 (or 30000), tandem-cli serve on 8080."));
    form->addRow(tr("Server &address:"), url_);
    key_->setAccessibleName(tr("API key"));
    key_->setEchoMode(QLineEdit::Password);  // never shown; kept in Tandem's settings file
    key_->setPlaceholderText(tr("None"));
    key_->setToolTip(tr("The key the server was started with (vLLM --api-key, tandem-cli serve --api-key); sent as "
                        "\"Authorization: Bearer KEY\". Leave empty when it needs none."));
    form->addRow(tr("API &key:"), key_);
    keyWarning_->setWordWrap(true);
    keyWarning_->setObjectName(QStringLiteral("hint"));
    keyWarning_->setVisible(false);
    form->addRow(QString(), keyWarning_);

    auto* testRow = new QHBoxLayout;
    test_->setAccessibleName(tr("Test connection"));
    test_->setToolTip(tr("Ask the server which models it has (GET /v1/models)"));
    testRow->addWidget(test_);
    testRow->addStretch();
    form->addRow(QString(), testRow);
    status_->setObjectName(QStringLiteral("remoteStatus"));
    status_->setWordWrap(true);
    status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    status_->setAccessibleName(tr("Connection status"));
    status_->setMinimumWidth(420);
    form->addRow(QString(), status_);

    model_->setEditable(true);  // a server that lists nothing useful: the id may be typed
    model_->setAccessibleName(tr("Model on the server"));
    model_->setToolTip(tr("Which of the server's models to chat with; Test Connection lists them"));
    model_->setInsertPolicy(QComboBox::NoInsert);
    model_->setMinimumContentsLength(24);
    if (!endpoint.model.isEmpty()) model_->addItem(endpoint.model);
    form->addRow(tr("&Model:"), model_);
    layout->addLayout(form);

    problem_->setObjectName(QStringLiteral("remoteProblem"));
    problem_->setWordWrap(true);
    problem_->setStyleSheet(QStringLiteral("color: #c62828;"));
    problem_->setVisible(false);
    layout->addWidget(problem_);

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    buttons->button(QDialogButtonBox::Ok)->setText(endpoint.isValid() ? tr("&Save") : tr("&Add"));
    if (endpoint.isValid()) {
        QPushButton* removeButton = buttons->addButton(tr("&Remove"), QDialogButtonBox::DestructiveRole);
        removeButton->setAccessibleName(tr("Remove this server model"));
        connect(removeButton, &QPushButton::clicked, this, [this] {
            const auto answer = QMessageBox::question(this, tr("Remove the Server Model?"),
                                                      tr("Remove “%1” from Tandem? Its conversations stay.")
                                                          .arg(original_.name.isEmpty() ? original_.model : original_.name));
            if (answer != QMessageBox::Yes) return;
            remove_ = true;
            QDialog::accept();
        });
    }
    layout->addWidget(buttons);
    connect(buttons, &QDialogButtonBox::accepted, this, &RemoteModelDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(test_, &QPushButton::clicked, this, &RemoteModelDialog::testConnection);
    connect(lister_, &RemoteModelLister::listed, this, &RemoteModelDialog::onListed);
    connect(lister_, &RemoteModelLister::failed, this, &RemoteModelDialog::onFailed);
    connect(url_, &QLineEdit::textChanged, this, &RemoteModelDialog::updateKeyWarning);
    connect(key_, &QLineEdit::textChanged, this, &RemoteModelDialog::updateKeyWarning);
    setStatus(tr("Test the connection to list the server's models."), false);
    updateKeyWarning();
    (url_->text().isEmpty() ? url_ : name_)->setFocus();
}

RemoteModelDialog::~RemoteModelDialog() { lister_->cancel(); }

RemoteEndpoint RemoteModelDialog::endpoint() const {
    RemoteEndpoint e = original_;
    e.baseUrl = url_->text().trimmed();
    e.apiKey = key_->text().trimmed();
    e.model = model_->currentText().trimmed();
    e.name = name_->text().trimmed().isEmpty() ? e.model : name_->text().trimmed();
    return e;
}

QString RemoteModelDialog::problem() const {
    if (const QString p = remoteUrlProblem(url_->text()); !p.isEmpty()) return p;
    for (const QChar c : key_->text().trimmed())
        if (c.isSpace() || c.unicode() < 0x21 || c.unicode() > 0x7e)
            return tr("The API key may hold letters, digits and punctuation only, no spaces.");
    if (model_->currentText().trimmed().isEmpty())
        return tr("Choose the model to chat with: Test Connection lists the server's models.");
    return {};
}

QString RemoteModelDialog::statusText() const { return status_->text(); }
bool RemoteModelDialog::isTesting() const { return lister_->isRunning(); }

void RemoteModelDialog::testConnection() {
    problem_->setVisible(false);
    if (const QString p = remoteUrlProblem(url_->text()); !p.isEmpty()) {
        setStatus(p, true);
        emit tested(false);
        return;
    }
    setStatus(tr("Asking %1 for its models…").arg(remoteApiUrl(url_->text(), QStringLiteral("/models")).toString()), false);
    test_->setEnabled(false);
    lister_->start(endpoint());
}

void RemoteModelDialog::onListed(const RemoteModelList& models) {
    test_->setEnabled(true);
    listed_ = models.ids;
    const QString chosen = model_->currentText().trimmed();
    model_->clear();
    model_->addItems(models.ids);
    // The model chosen before, if the server still has it; else its first.
    model_->setCurrentIndex(std::max<int>(0, static_cast<int>(models.ids.indexOf(chosen))));
    QStringList shown = models.ids.mid(0, 6);
    if (models.ids.size() > shown.size()) shown << QStringLiteral("…");
    setStatus(models.ids.size() == 1 ? tr("Connected. The server has one model: %1.").arg(shown.join(QString()))
                                     : tr("Connected. The server has %1 models: %2.").arg(models.ids.size()).arg(shown.join(QStringLiteral(", "))),
              false);
    emit tested(true);
}

void RemoteModelDialog::onFailed(const QString& message) {
    test_->setEnabled(true);
    listed_.clear();
    // Where to fix it is here.
    setStatus(QString(message).remove(tr(" (File ▸ Edit Server)")), true);
    emit tested(false);
}

void RemoteModelDialog::setStatus(const QString& text, bool error) {
    status_->setText(text);
    status_->setStyleSheet(error ? QStringLiteral("color: #c62828;") : QString());
    // A long message wraps onto more lines: the dialog grows to show it whole.
    if (layout()) {
        layout()->activate();
        const int needed = layout()->totalHeightForWidth(width());
        if (needed > height()) resize(width(), needed);
    }
}

void RemoteModelDialog::updateKeyWarning() {
    const bool clear = remoteKeyTravelsInClear(url_->text(), key_->text());
    keyWarning_->setText(clear ? tr("The key travels unencrypted over http:// to another computer; anyone on the "
                                    "network between can read it. Prefer https:// where the server offers it.")
                               : QString());
    keyWarning_->setVisible(clear);
}

void RemoteModelDialog::accept() {
    // Enter (or Add) with an address and no model yet: what the user wants first is the list.
    if (remoteUrlProblem(url_->text()).isEmpty() && model_->currentText().trimmed().isEmpty()) {
        if (!isTesting()) testConnection();
        return;
    }
    if (const QString p = problem(); !p.isEmpty()) {
        problem_->setText(p);
        problem_->setVisible(true);
        (remoteUrlProblem(url_->text()).isEmpty() ? static_cast<QWidget*>(model_) : url_)->setFocus();
        return;
    }
    QDialog::accept();
}

}  // namespace tandem::ui
