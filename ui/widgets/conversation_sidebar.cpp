#include "ui/widgets/conversation_sidebar.h"

#include <QAction>
#include <QApplication>
#include <QLineEdit>
#include <QListView>
#include <QMenu>
#include <QPainter>
#include <QPushButton>
#include <QStyledItemDelegate>
#include <QVBoxLayout>

#include "ui/models/conversation_list_model.h"

namespace tandem::ui {
namespace {

// "14:05" today, "3 Nov" this year, the locale's short date before.
QString whenText(const QDateTime& when) {
    const QLocale locale;
    const QDate today = QDate::currentDate();
    if (when.date() == today) return locale.toString(when.time(), QStringLiteral("HH:mm"));
    if (when.date().year() == today.year()) return locale.toString(when.date(), QStringLiteral("d MMM"));
    return locale.toString(when.date(), QLocale::ShortFormat);
}

// Title on the first line; the matching text (searching) or the date below it, smaller and dimmer.
class ConversationDelegate : public QStyledItemDelegate {
public:
    using QStyledItemDelegate::QStyledItemDelegate;

    QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex&) const override {
        const QFontMetrics fm(option.font);
        return {200, fm.height() * 2 + 14};
    }

    void paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override {
        QStyleOptionViewItem opt = option;
        initStyleOption(&opt, index);
        opt.text.clear();
        QStyle* style = opt.widget ? opt.widget->style() : QApplication::style();
        style->drawControl(QStyle::CE_ItemViewItem, &opt, painter, opt.widget);

        const bool selected = opt.state & QStyle::State_Selected;
        const QColor text = opt.palette.color(selected ? QPalette::HighlightedText : QPalette::Text);
        QColor dim = text;
        dim.setAlphaF(0.65f);
        const QRect r = opt.rect.adjusted(10, 6, -10, -6);
        QFont titleFont = opt.font;
        titleFont.setWeight(QFont::DemiBold);
        painter->save();
        painter->setFont(titleFont);
        painter->setPen(text);
        const QFontMetrics fm(titleFont);
        painter->drawText(r.left(), r.top(), r.width(), fm.height(), Qt::AlignLeft | Qt::AlignVCenter,
                          fm.elidedText(index.data(Qt::DisplayRole).toString(), Qt::ElideRight, r.width()));
        QFont small = opt.font;
        small.setPointSizeF(small.pointSizeF() * 0.9);
        painter->setFont(small);
        painter->setPen(dim);
        const QString snippet = index.data(ConversationListModel::SnippetRole).toString();
        const QString second = snippet.isEmpty()
                                   ? whenText(index.data(ConversationListModel::UpdatedRole).toDateTime())
                                   : snippet.simplified();
        const QFontMetrics sm(small);
        painter->drawText(r.left(), r.top() + fm.height() + 2, r.width(), sm.height(), Qt::AlignLeft | Qt::AlignVCenter,
                          sm.elidedText(second, Qt::ElideRight, r.width()));
        painter->restore();
    }
};

}  // namespace

ConversationSidebar::ConversationSidebar(ConversationListModel* model, QWidget* parent)
    : QWidget(parent), model_(model), search_(new QLineEdit(this)), newChat_(new QPushButton(tr("New chat"), this)),
      list_(new QListView(this)) {
    setObjectName(QStringLiteral("sidebar"));
    setAttribute(Qt::WA_StyledBackground);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(10, 10, 10, 10);
    layout->setSpacing(8);

    newChat_->setAccessibleName(tr("New chat"));
    newChat_->setToolTip(tr("Start a new conversation (Ctrl+N)"));
    connect(newChat_, &QPushButton::clicked, this, &ConversationSidebar::newChatRequested);
    layout->addWidget(newChat_);

    search_->setPlaceholderText(tr("Search all messages"));
    search_->setAccessibleName(tr("Search conversations"));
    search_->setToolTip(tr("Find conversations by any word in their messages (Ctrl+F)"));
    search_->setClearButtonEnabled(true);
    connect(search_, &QLineEdit::textChanged, model_, &ConversationListModel::setSearchQuery);
    layout->addWidget(search_);

    list_->setModel(model_);
    list_->setItemDelegate(new ConversationDelegate(list_));
    list_->setAccessibleName(tr("Conversations"));
    list_->setEditTriggers(QAbstractItemView::EditKeyPressed);
    list_->setSelectionMode(QAbstractItemView::SingleSelection);
    list_->setContextMenuPolicy(Qt::CustomContextMenu);
    list_->setFrameShape(QFrame::NoFrame);
    list_->setUniformItemSizes(true);
    connect(list_, &QListView::customContextMenuRequested, this, &ConversationSidebar::showContextMenu);
    connect(list_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& current) {
        const qint64 id = idAt(current.row());
        if (id != 0 && id != currentId_) emit conversationActivated(id);
    });
    // The list is rebuilt when conversations change; keep the open one selected.
    connect(model_, &QAbstractItemModel::modelReset, this, [this] { setCurrentConversation(currentId_); });
    layout->addWidget(list_, 1);

    auto* del = new QAction(tr("Delete conversation"), list_);
    del->setShortcut(QKeySequence::Delete);
    del->setShortcutContext(Qt::WidgetShortcut);
    connect(del, &QAction::triggered, this, [this] {
        if (const qint64 id = idAt(list_->currentIndex().row())) emit deleteRequested(id);
    });
    list_->addAction(del);
}

qint64 ConversationSidebar::idAt(int row) const { return model_->idAt(row); }

void ConversationSidebar::setCurrentConversation(qint64 id) {
    currentId_ = id;
    const int row = model_->rowOf(id);
    const QSignalBlocker block(list_->selectionModel());
    if (row < 0) {
        list_->selectionModel()->clear();
        return;
    }
    list_->setCurrentIndex(model_->index(row));
}

void ConversationSidebar::focusSearch() {
    search_->setFocus();
    search_->selectAll();
}

void ConversationSidebar::rename(qint64 id) {
    const int row = model_->rowOf(id);
    if (row >= 0) list_->edit(model_->index(row));
}

void ConversationSidebar::showContextMenu(const QPoint& pos) {
    const QModelIndex index = list_->indexAt(pos);
    const qint64 id = idAt(index.row());
    if (id == 0) return;
    QMenu menu(this);
    menu.addAction(tr("Rename"), this, [this, id] { rename(id); });
    menu.addAction(tr("Export as Markdown…"), this, [this, id] { emit exportRequested(id, ExportFormat::Markdown); });
    menu.addAction(tr("Export as JSON…"), this, [this, id] { emit exportRequested(id, ExportFormat::Json); });
    menu.addSeparator();
    menu.addAction(tr("Delete…"), this, [this, id] { emit deleteRequested(id); });
    menu.exec(list_->viewport()->mapToGlobal(pos));
}

}  // namespace tandem::ui
