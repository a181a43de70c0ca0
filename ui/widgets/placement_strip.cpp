#include "ui/widgets/placement_strip.h"

#include <QPainter>

namespace tandem::ui {
namespace {

const QColor kGpu(0x10, 0xb9, 0x81);       // the dashboard's GPU green
const QColor kStreamed(0x3b, 0x82, 0xf6);  // blue: CPU, and the GPU for long prompts
const QColor kCpu(0xf5, 0x9e, 0x0b);       // the dashboard's CPU orange
// A split layer ('P') is drawn half green over half orange.

constexpr int kHeight = 14;

}  // namespace

QString layerRanges(const QString& map, QChar kind) {
    QStringList parts;
    for (int l = 0; l < map.size();) {
        if (map[l] != kind) {
            ++l;
            continue;
        }
        int end = l;
        while (end + 1 < map.size() && map[end + 1] == kind) ++end;
        parts << (end == l ? QString::number(l) : QStringLiteral("%1-%2").arg(l).arg(end));
        l = end + 1;
    }
    return parts.join(QStringLiteral(", "));
}

PlacementStrip::PlacementStrip(QWidget* parent) : QWidget(parent) {
    setAccessibleName(tr("Where the routed experts run, per layer"));
    setMap({});
}

void PlacementStrip::setMap(const QString& map) {
    map_ = map;
    setVisible(!map.isEmpty());
    const QString gpu = layerRanges(map, QLatin1Char('G')), split = layerRanges(map, QLatin1Char('P')),
                  streamed = layerRanges(map, QLatin1Char('S')), cpu = layerRanges(map, QLatin1Char('C'));
    QStringList tip;
    if (!gpu.isEmpty()) tip << tr("GPU: layers %1").arg(gpu);
    if (!split.isEmpty()) tip << tr("The most used experts on the GPU, the rest on the CPU: layers %1").arg(split);
    if (!streamed.isEmpty()) tip << tr("CPU, and the GPU for long prompts: layers %1").arg(streamed);
    if (!cpu.isEmpty()) tip << tr("CPU: layers %1").arg(cpu);
    setToolTip(tip.join(QLatin1Char('\n')));
    setAccessibleDescription(reading());
    updateGeometry();
    update();
}

QString PlacementStrip::reading() const {
    const auto count = [this](char c) { return static_cast<int>(map_.count(QLatin1Char(c))); };
    const int gpu = count('G'), split = count('P'), streamed = count('S'), cpu = count('C'), moe = gpu + split + streamed + cpu;
    if (moe == 0) return {};
    QStringList parts;
    if (gpu > 0) parts << tr("%1 of %2 MoE layers on the GPU (layers %3)").arg(gpu).arg(moe).arg(layerRanges(map_, QLatin1Char('G')));
    if (split > 0)
        parts << tr("%1 split between the GPU and the CPU (%2)").arg(split).arg(layerRanges(map_, QLatin1Char('P')));
    const QString onCpu = gpu + split > 0 ? tr("%1 on the CPU").arg(streamed + cpu) : tr("all %1 MoE layers on the CPU").arg(moe);
    if (streamed > 0)
        parts << tr("%1, streamed through the GPU for long prompts (%2)").arg(onCpu, layerRanges(map_, QLatin1Char('S')));
    else if (cpu > 0)
        parts << (gpu + split > 0 ? tr("%1 (%2)").arg(onCpu, layerRanges(map_, QLatin1Char('C'))) : onCpu);
    return parts.join(QStringLiteral(", "));
}

QSize PlacementStrip::sizeHint() const { return {240, kHeight}; }
QSize PlacementStrip::minimumSizeHint() const { return {60, kHeight}; }

void PlacementStrip::paintEvent(QPaintEvent*) {
    if (map_.isEmpty()) return;
    QPainter p(this);
    const double cell = static_cast<double>(width()) / map_.size();
    for (int l = 0; l < map_.size(); ++l) {
        const QChar c = map_[l];
        QColor color = c == QLatin1Char('G') ? kGpu : c == QLatin1Char('S') ? kStreamed : c == QLatin1Char('C') ? kCpu
                                                                                                             : palette().mid().color();
        const QRectF r = QRectF(l * cell, 0, cell, height()).adjusted(0, 0, cell > 3 ? -1 : 0, 0);
        if (c == QLatin1Char('P')) {
            p.fillRect(QRectF(r.left(), r.top(), r.width(), r.height() / 2), kGpu);
            p.fillRect(QRectF(r.left(), r.center().y(), r.width(), r.height() / 2), kCpu);
            continue;
        }
        p.fillRect(r, color);
    }
}

}  // namespace tandem::ui
