#include "ui/widgets/theme.h"

#include <QApplication>
#include <QFont>
#include <QFontDatabase>
#include <QFontInfo>
#include <QPalette>
#include <QStyle>
#include <QStyleFactory>

namespace tandem::ui {
namespace {

struct Colors {
    QColor window, base, alternate, text, dimText, button, highlight, highlightedText, link, border, bubble, code,
        errorBackground, errorBorder, warningBackground, warningBorder, sidebar;
};

const Colors kLight{QColor(0xf6, 0xf7, 0xf9), QColor(0xff, 0xff, 0xff), QColor(0xf1, 0xf3, 0xf6), QColor(0x1f, 0x23, 0x28),
                    QColor(0x65, 0x6d, 0x76), QColor(0xf3, 0xf4, 0xf6), QColor(0x25, 0x63, 0xeb), QColor(0xff, 0xff, 0xff),
                    QColor(0x1d, 0x4e, 0xd8), QColor(0xd8, 0xdc, 0xe2), QColor(0xe8, 0xf0, 0xfe), QColor(0xf6, 0xf8, 0xfa),
                    QColor(0xfd, 0xec, 0xec), QColor(0xe5, 0x48, 0x4d), QColor(0xff, 0xf6, 0xdb), QColor(0xe0, 0xa8, 0x00),
                    QColor(0xee, 0xf0, 0xf3)};
const Colors kDark{QColor(0x1f, 0x20, 0x23), QColor(0x17, 0x18, 0x1b), QColor(0x24, 0x26, 0x2a), QColor(0xe3, 0xe5, 0xe8),
                   QColor(0x9a, 0xa1, 0xab), QColor(0x2b, 0x2d, 0x31), QColor(0x3b, 0x82, 0xf6), QColor(0xff, 0xff, 0xff),
                   QColor(0x7c, 0xb4, 0xff), QColor(0x3a, 0x3d, 0x43), QColor(0x1f, 0x35, 0x5c), QColor(0x20, 0x22, 0x26),
                   QColor(0x45, 0x1c, 0x1e), QColor(0xe5, 0x48, 0x4d), QColor(0x3f, 0x33, 0x10), QColor(0xc8, 0x96, 0x00),
                   QColor(0x1a, 0x1b, 0x1e)};

bool dark = false;

QPalette paletteFor(const Colors& c) {
    QPalette p;
    p.setColor(QPalette::Window, c.window);
    p.setColor(QPalette::WindowText, c.text);
    p.setColor(QPalette::Base, c.base);
    p.setColor(QPalette::AlternateBase, c.alternate);
    p.setColor(QPalette::Text, c.text);
    p.setColor(QPalette::PlaceholderText, c.dimText);
    p.setColor(QPalette::Button, c.button);
    p.setColor(QPalette::ButtonText, c.text);
    p.setColor(QPalette::ToolTipBase, c.base);
    p.setColor(QPalette::ToolTipText, c.text);
    p.setColor(QPalette::Highlight, c.highlight);
    p.setColor(QPalette::HighlightedText, c.highlightedText);
    p.setColor(QPalette::Link, c.link);
    p.setColor(QPalette::BrightText, QColor(0xff, 0x55, 0x55));
    p.setColor(QPalette::Light, c.base.lighter(115));
    p.setColor(QPalette::Midlight, c.button.lighter(110));
    p.setColor(QPalette::Mid, c.border);
    p.setColor(QPalette::Dark, c.border.darker(130));
    p.setColor(QPalette::Shadow, QColor(0, 0, 0, 90));
    for (const auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
        p.setColor(QPalette::Disabled, role, c.dimText);
    return p;
}

QString styleSheetFor(const Colors& c, double basePoint) {
    const auto n = [](const QColor& color) { return color.name(); };
    const QString small = QString::number(std::max(7.0, basePoint - 1.0), 'f', 1);
    const QString large = QString::number(basePoint * 1.7, 'f', 1);
    return QStringLiteral(
               "#chatView, #chatContent, #emptyState, #chatHeader, #composer { background: %1; }"
               "#userMessage { background: %2; border-radius: 12px; }"
               "#assistantMessage { background: transparent; }"
               "#messageAuthor { font-weight: 600; }"
               "#messageFooter, #codeLanguage, #hint, #contextLabel { color: %3; font-size: %4pt; }"
               "#messageFooter[problem=\"true\"], #wizardError { color: %5; }"
               "#reasoningText { color: %3; }"
               "#reasoningToggle { color: %3; border: none; background: transparent; }"
               "#codeBlock { background: %6; border: 1px solid %7; border-radius: 8px; }"
               "#codeBlock QTextBrowser { background: transparent; }"
               "#banner { border-radius: 8px; border: 1px solid %7; }"
               "#banner[kind=\"error\"] { background: %8; border-color: %5; }"
               "#banner[kind=\"warning\"] { background: %9; border-color: %10; }"
               "#emptyTitle { font-size: %11pt; font-weight: 600; }"
               "#sidebar { background: %12; }"
               "#sidebar QListView { background: transparent; }"
               "#sidebar QLineEdit { border: 1px solid %7; border-radius: 6px; padding: 4px 6px; background: %1; }"
               "#chatHeaderTitle { font-weight: 600; }"
               "#dashboardTitle, #dashboardModel { font-weight: 600; }"
               "#contextBar { border: 1px solid %7; border-radius: 4px; background: %1; }"
               "#contextBar::chunk { background: %13; border-radius: 3px; }"
               "#composer QPlainTextEdit { border: 1px solid %7; border-radius: 8px; padding: 4px; }")
        .arg(n(c.base), n(c.bubble), n(c.dimText), small, n(c.errorBorder), n(c.code), n(c.border), n(c.errorBackground),
             n(c.warningBackground), n(c.warningBorder), large)
        .arg(n(c.sidebar), n(c.highlight));
}

}  // namespace

bool applyTheme(const Appearance& appearance) {
    // The platform's palette before Tandem replaces it decides what "system" means.
    static const QPalette systemPalette = QApplication::palette();
    static const QFont systemFont = QApplication::font();
    static const bool systemIsDark = systemPalette.color(QPalette::Window).lightness() < 128 ||
                                     qEnvironmentVariable("GTK_THEME").endsWith(QLatin1String(":dark"));

    dark = appearance.theme == ThemeChoice::Dark || (appearance.theme == ThemeChoice::System && systemIsDark);
    const Colors& colors = dark ? kDark : kLight;
    QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
    QFont font = systemFont;
    if (appearance.fontPointSize > 0) font.setPointSize(appearance.fontPointSize);
    QApplication::setFont(font);
    QApplication::setPalette(paletteFor(colors));
    const double basePoint = font.pointSizeF() > 0 ? font.pointSizeF() : 10.0;
    qApp->setStyleSheet(styleSheetFor(colors, basePoint));
    return dark;
}

bool isDarkTheme() { return dark; }

QFont codeFont() {
    static const QFont font = [] {
        QFont system = QFontDatabase::systemFont(QFontDatabase::FixedFont);
        if (QFontInfo(system).fixedPitch()) return system;
        // fonts-dejavu-core is a dependency of the package; the others are common on desktops.
        for (const char* family : {"DejaVu Sans Mono", "Noto Sans Mono", "Liberation Mono", "monospace"}) {
            QFont candidate(QString::fromLatin1(family), system.pointSize());
            candidate.setStyleHint(QFont::Monospace);
            candidate.setFixedPitch(true);
            if (QFontInfo(candidate).fixedPitch()) return candidate;
        }
        for (const QString& family : QFontDatabase::families())
            if (QFontDatabase::isFixedPitch(family)) return QFont(family, system.pointSize());
        return system;
    }();
    return font;
}

}  // namespace tandem::ui
