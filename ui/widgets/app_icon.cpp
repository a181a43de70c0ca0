#include "ui/widgets/app_icon.h"

#include <QImage>
#include <QPainter>
#include <QPixmap>
#include <QSvgRenderer>

// resources/tandem.qrc lives in the static tandem_ui library, so it must be registered by name before
// use; Q_INIT_RESOURCE only works outside a namespace.
static void registerTandemResources() { Q_INIT_RESOURCE(tandem); }

namespace tandem::ui {

QIcon appIcon() {
    static const QIcon icon = [] {
        registerTandemResources();
        QSvgRenderer renderer(QStringLiteral(":/icons/tandem.svg"));
        QIcon rendered;
        for (const int size : {16, 22, 24, 32, 48, 64, 128, 256}) {
            QImage image(size, size, QImage::Format_ARGB32_Premultiplied);
            image.fill(Qt::transparent);
            QPainter painter(&image);
            painter.setRenderHint(QPainter::Antialiasing);
            renderer.render(&painter);
            painter.end();
            rendered.addPixmap(QPixmap::fromImage(image));
        }
        return rendered;
    }();
    return icon;
}

}  // namespace tandem::ui
