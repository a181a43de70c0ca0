#include "ui/widgets/model_picker.h"

#include <QDir>
#include <QFileInfo>
#include <QSignalBlocker>
#include <QStandardItemModel>

#include "ui/controllers/model_controller.h"
#include "ui/settings/app_paths.h"
#include "ui/worker/remote_api.h"

namespace tandem::ui {
namespace {

constexpr int kDirRole = Qt::UserRole;
constexpr int kKindRole = Qt::UserRole + 1;

}  // namespace

ModelPicker::ModelPicker(ModelController* model, QWidget* parent) : QComboBox(parent), model_(model) {
    setObjectName(QStringLiteral("modelPicker"));
    setAccessibleName(tr("Model"));
    setToolTip(tr("The model this chat talks to. Choose another, open a model folder, or get a model."));
    setPlaceholderText(tr("No model"));
    // As wide as its names up to 320 pixels; in a narrow window down to 100, the name elided.
    setSizeAdjustPolicy(QComboBox::AdjustToContents);
    setMinimumWidth(100);
    setMaximumWidth(320);
    connect(this, qOverload<int>(&QComboBox::activated), this, &ModelPicker::onActivated);
    connect(model_, &ModelController::stateChanged, this, &ModelPicker::refresh);
    connect(model_, &ModelController::switchFailed, this, &ModelPicker::refresh);
    refresh();
}

void ModelPicker::addHeading(const QString& text) {
    auto* list = qobject_cast<QStandardItemModel*>(model());
    if (count() > 0) insertSeparator(count());
    auto* item = new QStandardItem(text);
    item->setFlags(Qt::NoItemFlags);  // a heading: neither chosen nor selected
    QFont bold = font();
    bold.setBold(true);
    item->setFont(bold);
    item->setData(static_cast<int>(RowKind::Heading), kKindRole);
    list->appendRow(item);
}

void ModelPicker::addModel(const QString& name, const QString& dir, const QString& tooltip) {
    addItem(QStringLiteral("  ") + name);
    const int row = count() - 1;
    setItemData(row, dir, kDirRole);
    setItemData(row, static_cast<int>(RowKind::Model), kKindRole);
    setItemData(row, tooltip, Qt::ToolTipRole);
    setItemData(row, name, Qt::AccessibleTextRole);
}

QString ModelPicker::remoteTooltip(const QString& key) const {
    const RemoteEndpoint e = model_->remoteModel(key);
    return tr("%1 at %2").arg(e.model, remoteApiBase(e.baseUrl));
}

void ModelPicker::addAction(const QString& text, RowKind kind) {
    addItem(text);
    setItemData(count() - 1, static_cast<int>(kind), kKindRole);
}

void ModelPicker::refresh() {
    if (refreshing_) return;
    refreshing_ = true;
    const QSignalBlocker block(this);
    clear();
    const QList<ModelChoice> choices = model_->modelChoices();
    const QString current = model_->state() == ModelController::State::Loading ? model_->loadingDir()
                            : model_->isReady()                               ? model_->summary().dir
                                                                              : QString();
    ModelChoice::Source section = ModelChoice::Source::Shipped;
    bool first = true;
    bool currentListed = false;
    for (const ModelChoice& c : choices) {
        if (first || c.source != section) {
            section = c.source;
            first = false;
            addHeading(section == ModelChoice::Source::Shipped        ? tr("Ships with Tandem")
                       : section == ModelChoice::Source::ModelsFolder ? tr("In your models folder")
                       : section == ModelChoice::Source::Remote       ? tr("On a server")
                                                                      : tr("Opened before"));
        }
        addModel(c.name, c.dir, c.source == ModelChoice::Source::Remote ? remoteTooltip(c.dir) : QDir::toNativeSeparators(c.dir));
        currentListed |= paths::sameFolder(c.dir, current);
    }
    // A model in use that the list does not offer (a folder opened once, not loadable any more): shown
    // all the same, so the picker never names another model than the one in use.
    if (!current.isEmpty() && !currentListed) {
        addHeading(tr("In use"));
        addModel(model_->nameOf(current), current, QDir::toNativeSeparators(current));
    }
    if (count() > 0) insertSeparator(count());
    addAction(tr("Open Model Folder…"), RowKind::OpenFolder);
    addAction(tr("Get a Model…"), RowKind::GetModel);
    addAction(tr("Add a Server…"), RowKind::AddServer);
    setCurrentIndex(rowOf(current));
    refreshing_ = false;
}

int ModelPicker::rowOf(const QString& dir) const {
    if (dir.isEmpty()) return -1;
    for (int row = 0; row < count(); ++row)
        if (kindAt(row) == RowKind::Model && paths::sameFolder(itemData(row, kDirRole).toString(), dir)) return row;
    return -1;
}

QString ModelPicker::dirAt(int row) const { return itemData(row, kDirRole).toString(); }

ModelPicker::RowKind ModelPicker::kindAt(int row) const {
    const QVariant kind = itemData(row, kKindRole);
    return kind.isValid() ? static_cast<RowKind>(kind.toInt()) : RowKind::Heading;
}

QStringList ModelPicker::modelNames() const {
    QStringList names;
    for (int row = 0; row < count(); ++row)
        if (kindAt(row) == RowKind::Model) names << itemData(row, Qt::AccessibleTextRole).toString();
    return names;
}

void ModelPicker::showPopup() {
    refresh();  // models added to the folder since, a recent folder that went away
    QComboBox::showPopup();
}

void ModelPicker::onActivated(int row) {
    const RowKind kind = kindAt(row);
    const QString dir = dirAt(row);
    const QString current = model_->state() == ModelController::State::Loading ? model_->loadingDir()
                            : model_->isReady()                               ? model_->summary().dir
                                                                              : QString();
    // The row shown stays the model in use until a new one loaded; an action row is never "current".
    refresh();
    switch (kind) {
    case RowKind::Model:
        if (!paths::sameFolder(dir, current)) emit modelChosen(dir);
        break;
    case RowKind::OpenFolder: emit openFolderRequested(); break;
    case RowKind::GetModel: emit getModelRequested(); break;
    case RowKind::AddServer: emit addServerRequested(); break;
    case RowKind::Heading: break;
    }
}

}  // namespace tandem::ui
