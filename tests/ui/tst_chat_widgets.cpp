// The chat's widgets on their own: Markdown with code blocks and their copy buttons, the collapsible
// reasoning, message actions and footers, and the composer's keys.
#include <QApplication>
#include <QClipboard>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QScrollBar>
#include <QTest>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextFrame>
#include <QToolButton>

#include "ui/models/message_model.h"
#include "ui/widgets/chat_view.h"
#include "ui/widgets/code_block_view.h"
#include "ui/widgets/composer.h"
#include "ui/widgets/markdown_view.h"
#include "ui/widgets/message_view.h"
#include "ui/widgets/reasoning_section.h"

using namespace tandem::ui;

namespace {

QToolButton* buttonNamed(QWidget* parent, const QString& accessibleName) {
    for (QToolButton* b : parent->findChildren<QToolButton*>())
        if (b->accessibleName() == accessibleName) return b;
    return nullptr;
}

ChatMessage answer(const QString& content, const QString& reasoning = {}) {
    ChatMessage m;
    m.id = 2;
    m.role = "assistant";
    m.model = "tiny";
    m.content = content;
    m.reasoning = reasoning;
    m.metrics = {20, 128, 23.44, 0.31};
    return m;
}

}  // namespace

class ChatWidgetsTest : public QObject {
    Q_OBJECT

private slots:
    void markdownRendersHeadingsListsTablesAndCode() {
        MarkdownView view;
        view.setMarkdown("# Title\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\nprint('x')\n```\n");
        const auto prose = view.findChildren<QTextBrowser*>();
        const auto code = view.findChildren<CodeBlockView*>();
        QCOMPARE(code.size(), 1);
        QCOMPARE(code[0]->code(), QStringLiteral("print('x')"));
        QVERIFY(QFontInfo(code[0]->findChild<QTextBrowser*>()->font()).fixedPitch());
        QTextDocument* doc = prose[0]->document();
        QCOMPARE(doc->begin().blockFormat().headingLevel(), 1);
        QVERIFY(doc->toPlainText().contains("one"));
        QVERIFY(doc->rootFrame()->childFrames().size() >= 1);  // the table
        QVERIFY(view.visibleText().contains("print('x')"));
    }

    void inlineCodeIsFixedPitch() {
        // Whatever fontconfig names as the system's fixed font (under the offscreen platform it can be a
        // proportional one), inline code and code blocks get a font that is fixed pitch.
        MarkdownView view;
        view.setMarkdown("Run `ls -l` in the folder.");
        const QTextDocument* doc = view.findChild<QTextBrowser*>()->document();
        bool found = false;
        for (QTextBlock block = doc->begin(); block.isValid(); block = block.next())
            for (auto it = block.begin(); !it.atEnd(); ++it)
                if (it.fragment().text() == QStringLiteral("ls -l")) {
                    found = true;
                    QVERIFY(QFontInfo(it.fragment().charFormat().font()).fixedPitch());
                }
        QVERIFY(found);
    }

    void growingMarkdownReusesTheViewsItHas() {
        MarkdownView view;
        view.setMarkdown("Intro\n\n```cpp\nint a;");
        CodeBlockView* code = view.findChild<CodeBlockView*>();
        QVERIFY(code);
        view.setMarkdown("Intro\n\n```cpp\nint a;\nint b;");
        QCOMPARE(view.findChild<CodeBlockView*>(), code);  // the same block, grown
        QCOMPARE(code->code(), QStringLiteral("int a;\nint b;"));
        view.setMarkdown("Just text");
        QVERIFY(!view.findChild<CodeBlockView*>());
    }

    void codeBlockCopyButtonCopiesTheCode() {
        CodeBlockView block;
        block.setCode("make -j2", "sh");
        QToolButton* copy = buttonNamed(&block, "Copy code");
        QVERIFY(copy);
        QApplication::clipboard()->clear();
        QTest::mouseClick(copy, Qt::LeftButton);
        QCOMPARE(QApplication::clipboard()->text(), QStringLiteral("make -j2"));
    }

    void reasoningIsCollapsedUntilAsked() {
        MessageView view;
        view.setMessage(answer("The answer.", "Thinking it through."), true, false);
        view.show();
        ReasoningSection* reasoning = view.reasoningSection();
        QVERIFY(reasoning->isVisible());
        QVERIFY(!reasoning->isExpanded());
        auto* body = reasoning->findChild<QTextBrowser*>("reasoningText");
        QVERIFY(!body->isVisible());
        QToolButton* toggle = reasoning->findChild<QToolButton*>("reasoningToggle");
        QVERIFY(toggle->text().startsWith("Reasoning (3 words)"));
        QTest::mouseClick(toggle, Qt::LeftButton);
        QVERIFY(body->isVisible());
        QCOMPARE(body->toPlainText(), QStringLiteral("Thinking it through."));
        // No reasoning, no section.
        view.setMessage(answer("Plain."), true, false);
        QVERIFY(!reasoning->isVisible());
    }

    void answerFooterShowsItsFigures() {
        MessageView view;
        ChatMessage m = answer("Done.");
        view.setMessage(m, true, false);
        QCOMPARE(view.footerText(), QStringLiteral("128 tokens · 23.4 tokens/s · 0.31 s to first token"));
        m.state = MessageState::Stopped;
        view.setMessage(m, true, false);
        QVERIFY(view.footerText().startsWith("Stopped · 128 tokens"));
        m.state = MessageState::Failed;
        m.error = "Out of memory.";
        view.setMessage(m, true, false);
        QCOMPARE(view.footerText(), QStringLiteral("This answer failed: Out of memory."));
        m.state = MessageState::Interrupted;
        view.setMessage(m, true, false);
        QVERIFY(view.footerText().startsWith("Interrupted"));
        m.state = MessageState::Streaming;
        m.content.clear();
        view.setMessage(m, true, true);
        QCOMPARE(view.footerText(), QStringLiteral("Waiting for the first token…"));
    }

    void actionsFollowTheMessageAndTheBusyState() {
        MessageView view;
        view.show();
        ChatMessage question;
        question.id = 1;
        question.role = "user";
        question.content = "Hi";
        view.setMessage(question, false, false);
        QVERIFY(buttonNamed(&view, "Edit message")->isVisible());
        QVERIFY(!buttonNamed(&view, "Regenerate answer")->isVisible());
        view.setMessage(question, false, true);
        QVERIFY(!buttonNamed(&view, "Edit message")->isVisible());  // not while an answer is generated

        view.setMessage(answer("Hello"), true, false);
        QVERIFY(buttonNamed(&view, "Regenerate answer")->isVisible());
        view.setMessage(answer("Hello"), false, false);
        QVERIFY(!buttonNamed(&view, "Regenerate answer")->isVisible());  // only the last answer
        QSignalSpy copy(&view, &MessageView::copyRequested);
        QTest::mouseClick(buttonNamed(&view, "Copy message"), Qt::LeftButton);
        QCOMPARE(copy.count(), 1);
        QCOMPARE(copy.first().first().toLongLong(), qint64(2));
    }

    void editingSubmitsTheNewText() {
        MessageView view;
        view.show();
        ChatMessage question;
        question.id = 5;
        question.role = "user";
        question.content = "Old question";
        view.setMessage(question, false, false);
        QSignalSpy submitted(&view, &MessageView::editSubmitted);
        QTest::mouseClick(buttonNamed(&view, "Edit message"), Qt::LeftButton);
        QVERIFY(view.isEditing());
        auto* editor = view.findChild<QPlainTextEdit*>();
        QCOMPARE(editor->toPlainText(), QStringLiteral("Old question"));
        editor->setPlainText("New question");
        QPushButton* send = nullptr;
        for (QPushButton* b : view.findChildren<QPushButton*>())
            if (b->accessibleName() == "Send edited message") send = b;
        QTest::mouseClick(send, Qt::LeftButton);
        QVERIFY(!view.isEditing());
        QCOMPARE(submitted.count(), 1);
        QCOMPARE(submitted.first()[1].toString(), QStringLiteral("New question"));
    }

    void composerEnterSendsAndShiftEnterAddsALine() {
        Composer composer;
        composer.show();
        QSignalSpy send(&composer, &Composer::sendRequested);
        QSignalSpy stop(&composer, &Composer::stopRequested);
        composer.focusInput();
        QTest::keyClicks(composer.editor(), "first line");
        QTest::keyClick(composer.editor(), Qt::Key_Return, Qt::ShiftModifier);
        QTest::keyClicks(composer.editor(), "second");
        QCOMPARE(send.count(), 0);
        QCOMPARE(composer.text(), QStringLiteral("first line\nsecond"));
        QTest::keyClick(composer.editor(), Qt::Key_Return);
        QCOMPARE(send.count(), 1);
        QCOMPARE(send.first().first().toString(), QStringLiteral("first line\nsecond"));

        composer.setGenerating(true);
        QCOMPARE(composer.button()->text(), QStringLiteral("Stop"));
        QTest::keyClick(composer.editor(), Qt::Key_Return);  // Enter does not stop or send
        QCOMPARE(send.count(), 1);
        QTest::mouseClick(composer.button(), Qt::LeftButton);
        QCOMPARE(stop.count(), 1);

        composer.setGenerating(false);
        composer.setUnavailableReason("No model");
        QVERIFY(!composer.button()->isEnabled());
        QCOMPARE(composer.editor()->placeholderText(), QStringLiteral("No model"));
    }

    // Issue 24, item 10: a question shows as it was typed: its line breaks, blank lines and indents,
    // and characters Markdown would take for marks.
    void aQuestionIsShownAsTyped() {
        MessageView view;
        view.show();
        ChatMessage question;
        question.id = 1;
        question.role = "user";
        question.content = "First line\nsecond line\n\n    indented *not emphasis*\n# not a heading";
        view.setMessage(question, false, false);
        QCOMPARE(view.visibleText(), question.content);
        // The same view showing an answer renders its Markdown again.
        view.setMessage(answer("Hello **world**\nagain"), true, false);
        QCOMPARE(view.visibleText(), QStringLiteral("Hello world again"));
    }

    // Issue 24, items 2 and 5: an answer says when earlier messages were left out of its prompt; a
    // place with several versions has < n/m > to flip between them; any message can be deleted.
    void versionsNoteAndDeleteOnAMessage() {
        MessageView view;
        view.show();
        ChatMessage m = answer("Second try.");
        view.setMessage(m, true, false);
        QVERIFY(view.contextNoteText().isEmpty());
        QVERIFY(view.versionText().isEmpty());
        QVERIFY(!buttonNamed(&view, "Previous version")->isVisible());

        m.omittedMessages = 4;
        m.version = 2;
        m.versions = 3;
        view.setMessage(m, true, false);
        QCOMPARE(view.contextNoteText(), QStringLiteral("4 earlier messages were left out of this answer's prompt: the "
                                                        "conversation is longer than the model's context."));
        QCOMPARE(view.versionText(), QStringLiteral("2/3"));
        QSignalSpy version(&view, &MessageView::versionRequested);
        QTest::mouseClick(buttonNamed(&view, "Previous version"), Qt::LeftButton);
        QTest::mouseClick(buttonNamed(&view, "Next version"), Qt::LeftButton);
        QCOMPARE(version.count(), 2);
        QCOMPARE(version[0][0].toLongLong(), qint64(2));
        QCOMPARE(version[0][1].toInt(), 1);
        QCOMPARE(version[1][1].toInt(), 3);
        m.version = 3;
        view.setMessage(m, true, false);
        QVERIFY(buttonNamed(&view, "Previous version")->isEnabled());
        QVERIFY(!buttonNamed(&view, "Next version")->isEnabled());  // the last version
        view.setMessage(m, true, true);
        QVERIFY(!buttonNamed(&view, "Previous version")->isEnabled());  // not while an answer is generated
        QVERIFY(!buttonNamed(&view, "Delete message")->isVisible());

        view.setMessage(m, true, false);
        QSignalSpy deleted(&view, &MessageView::deleteRequested);
        QTest::mouseClick(buttonNamed(&view, "Delete message"), Qt::LeftButton);
        QCOMPARE(deleted.count(), 1);
        QCOMPARE(deleted.first().first().toLongLong(), qint64(2));
    }

    // Issue 24, item 5: flipping an earlier message to another version keeps that place in view; the
    // chat does not jump to its bottom.
    void anotherVersionKeepsItsPlaceInView() {
        MessageModel model;
        ChatView view(&model);
        view.resize(500, 300);
        view.show();
        QList<ChatMessage> messages;
        for (int i = 0; i < 20; ++i) {
            ChatMessage m = i % 2 ? answer(QString("An answer of some length, line %1.\n\nAnd a second paragraph.").arg(i))
                                  : ChatMessage{};
            if (i % 2 == 0) {
                m.role = "user";
                m.content = QString("Question %1").arg(i);
            }
            m.id = i + 1;
            messages.append(m);
        }
        model.setMessages(messages);
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        view.renderPending();
        QScrollBar* bar = view.verticalScrollBar();
        QTRY_VERIFY(bar->maximum() > 0);
        // The reader scrolls back to the second question (message 3) and flips its version.
        bar->setValue(view.messageView(2)->y() - 10);
        QApplication::processEvents();
        QVERIFY(bar->value() > 0 && bar->value() < bar->maximum());
        emit view.messageView(2)->versionRequested(3, 1);
        // The store answers with the other version of message 3 (a new id) and what follows it.
        QList<ChatMessage> flipped = messages.mid(0, 2);
        for (int i = 2; i < 20; ++i) {
            ChatMessage m = messages[i];
            m.id = 100 + i;
            flipped.append(m);
        }
        model.updateMessages(flipped);
        view.renderPending();
        QTest::qWait(100);
        QVERIFY2(bar->value() < bar->maximum(), qPrintable(QString("at %1 of %2").arg(bar->value()).arg(bar->maximum())));
        const QRect shown = view.messageView(2)->geometry().translated(0, -bar->value());
        QVERIFY2(shown.top() >= 0 && shown.top() < view.viewport()->height(), qPrintable(QString::number(shown.top())));
    }

    void chatViewFollowsTheModel() {
        MessageModel model;
        ChatView view(&model);
        ChatMessage q;
        q.id = 1;
        q.role = "user";
        q.content = "Q";
        model.append(q);
        ChatMessage a = answer("");
        a.state = MessageState::Streaming;
        model.append(a);
        QCOMPARE(view.messageCount(), 2);
        model.appendText(2, "Hello **world**", {});
        view.renderPending();
        QCOMPARE(view.messageView(1)->visibleText(), QStringLiteral("Hello world"));
        model.truncate(1);
        QCOMPARE(view.messageCount(), 1);
        model.setMessages({});
        QCOMPARE(view.messageCount(), 0);
    }
};

QTEST_MAIN(ChatWidgetsTest)
#include "tst_chat_widgets.moc"
