#include "ui/widgets/chat_view.h"

#include <QScrollBar>
#include <QTimer>
#include <QVBoxLayout>
#include <utility>

#include "ui/models/message_model.h"
#include "ui/widgets/message_view.h"

namespace tandem::ui {

ChatView::ChatView(MessageModel* model, QWidget* parent)
    : QScrollArea(parent), model_(model), content_(new QWidget), layout_(new QVBoxLayout(content_)) {
    setObjectName(QStringLiteral("chatView"));
    setAccessibleName(tr("Conversation"));
    setWidgetResizable(true);
    setFrameShape(QFrame::NoFrame);
    setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    content_->setObjectName(QStringLiteral("chatContent"));
    layout_->setContentsMargins(24, 16, 24, 16);
    layout_->setSpacing(12);
    layout_->addStretch();
    setWidget(content_);

    renderTimer_.setSingleShot(true);
    renderTimer_.setInterval(kRenderIntervalMs);
    connect(&renderTimer_, &QTimer::timeout, this, &ChatView::renderPending);

    // Stay at the bottom while new text arrives, unless the reader scrolled up to read.
    connect(verticalScrollBar(), &QScrollBar::valueChanged, this,
            [this](int value) { followBottom_ = value >= verticalScrollBar()->maximum() - 4; });
    connect(verticalScrollBar(), &QScrollBar::rangeChanged, this, [this](int, int max) {
        if (followBottom_) verticalScrollBar()->setValue(max);
    });

    connect(model_, &QAbstractItemModel::modelReset, this, &ChatView::rebuild);
    connect(model_, &QAbstractItemModel::rowsInserted, this,
            [this](const QModelIndex&, int first, int last) { onRowsInserted(first, last); });
    connect(model_, &QAbstractItemModel::rowsRemoved, this,
            [this](const QModelIndex&, int first, int last) { onRowsRemoved(first, last); });
    connect(model_, &QAbstractItemModel::dataChanged, this, [this](const QModelIndex& from, const QModelIndex& to) {
        for (int row = from.row(); row <= to.row(); ++row) markDirty(row);
    });
    rebuild();
}

MessageView* ChatView::createView() {
    auto* view = new MessageView(content_);
    connect(view, &MessageView::copyRequested, this, &ChatView::copyRequested);
    connect(view, &MessageView::editSubmitted, this, &ChatView::editSubmitted);
    connect(view, &MessageView::regenerateRequested, this, &ChatView::regenerateRequested);
    connect(view, &MessageView::versionRequested, this, [this](qint64 messageId, int version) {
        keepRow_ = model_->rowOfId(messageId);
        emit versionRequested(messageId, version);
    });
    connect(view, &MessageView::deleteRequested, this, &ChatView::deleteRequested);
    return view;
}

void ChatView::rebuild() {
    qDeleteAll(views_);
    views_.clear();
    dirty_.clear();
    followBottom_ = true;
    onRowsInserted(0, model_->rowCount() - 1);
}

void ChatView::onRowsInserted(int first, int last) {
    for (int row = first; row <= last; ++row) {
        MessageView* view = createView();
        views_.insert(row, view);
        layout_->insertWidget(row, view);  // before the trailing stretch
    }
    // Neighbours change too: the previous last answer can no longer be regenerated.
    for (int row = std::max(0, first - 1); row < views_.size(); ++row) refreshRow(row);
    // A new message brings the view to the bottom; another version of an earlier place leaves the
    // reader at that place.
    if (keepRow_ >= 0 && keepRow_ >= first && keepRow_ <= last) {
        followBottom_ = false;
        QTimer::singleShot(0, this, &ChatView::keepPlaceInView);
    } else if (last == first) {
        followBottom_ = true;
    }
}

void ChatView::keepPlaceInView() {
    const int row = std::exchange(keepRow_, -1);
    if (row < 0 || row >= views_.size()) return;
    content_->layout()->activate();
    followBottom_ = false;
    ensureWidgetVisible(views_[row], 0, 24);
}

void ChatView::onRowsRemoved(int first, int last) {
    // Later, not now: the removal may come from a button of that very view (its Delete), which is still
    // inside its click handler; deleting it there crashed now and then.
    for (int row = last; row >= first; --row) {
        MessageView* view = views_.takeAt(row);
        view->hide();
        view->deleteLater();
    }
    dirty_.clear();
    for (int row = 0; row < views_.size(); ++row) refreshRow(row);
}

void ChatView::markDirty(int row) {
    dirty_.insert(row);
    if (!renderTimer_.isActive()) renderTimer_.start();
}

void ChatView::renderPending() {
    renderTimer_.stop();
    const QSet<int> rows = std::exchange(dirty_, {});
    for (const int row : rows) refreshRow(row);
}

void ChatView::refreshRow(int row) {
    if (row < 0 || row >= views_.size() || row >= model_->rowCount()) return;
    const ChatMessage& m = model_->message(row);
    const bool isLastAnswer = row == model_->rowCount() - 1 && m.role == QLatin1String("assistant");
    views_[row]->setMessage(m, isLastAnswer, busy_);
}

void ChatView::setBusy(bool busy) {
    busy_ = busy;
    for (int row = 0; row < views_.size(); ++row) refreshRow(row);
}

}  // namespace tandem::ui
