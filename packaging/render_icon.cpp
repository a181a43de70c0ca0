// tandem-render-icon: renders the app's SVG icon to the PNG sizes of the hicolor theme at build time,
// with Qt's own SVG renderer, so no image tool outside Qt is needed and the PNGs never go stale.
//   tandem-render-icon ICON.svg OUTDIR SIZE...   writes OUTDIR/<S>x<S>/apps/<ICON>.png for each size
#include <QDir>
#include <QFileInfo>
#include <QImage>
#include <QPainter>
#include <QSaveFile>
#include <QSvgRenderer>
#include <cstdio>

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: tandem-render-icon ICON.svg OUTDIR SIZE...\n");
        return 2;
    }
    const QString svg = QString::fromLocal8Bit(argv[1]);
    QSvgRenderer renderer(svg);
    if (!renderer.isValid()) {
        std::fprintf(stderr, "tandem-render-icon: %s is not an SVG Qt can render\n", argv[1]);
        return 1;
    }
    const QString name = QFileInfo(svg).completeBaseName();
    for (int i = 3; i < argc; ++i) {
        bool ok = false;
        const int size = QString::fromLocal8Bit(argv[i]).toInt(&ok);
        if (!ok || size < 1 || size > 4096) {
            std::fprintf(stderr, "tandem-render-icon: '%s' is not a size in pixels\n", argv[i]);
            return 2;
        }
        QImage image(size, size, QImage::Format_ARGB32_Premultiplied);
        image.fill(Qt::transparent);
        QPainter painter(&image);
        painter.setRenderHint(QPainter::Antialiasing);
        renderer.render(&painter);
        painter.end();
        const QString dir = QStringLiteral("%1/%2x%2/apps").arg(QString::fromLocal8Bit(argv[2])).arg(size);
        // Written whole or not at all, so an interrupted build never leaves a truncated PNG behind.
        QSaveFile file(dir + QLatin1Char('/') + name + QStringLiteral(".png"));
        if (!QDir().mkpath(dir) || !file.open(QIODevice::WriteOnly) || !image.save(&file, "PNG") || !file.commit()) {
            std::fprintf(stderr, "tandem-render-icon: could not write %s\n", qPrintable(file.fileName()));
            return 1;
        }
    }
    return 0;
}
