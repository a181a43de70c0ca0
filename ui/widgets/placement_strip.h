#pragma once
// Where each layer's routed experts run (tandem::ModelInfo::expertLayers), as a strip of one cell per
// layer (GPU, CPU streamed through the GPU for long prompts, CPU, no routed experts), with a one-line
// reading of the same for tests and screen readers, and the layer ranges in the tooltip.
#include <QWidget>

namespace tandem::ui {

class PlacementStrip : public QWidget {
    Q_OBJECT
public:
    explicit PlacementStrip(QWidget* parent = nullptr);

    // One character per layer: 'G', 'S', 'C' or '-' (ModelInfo::expertLayers); empty hides the strip.
    void setMap(const QString& map);
    QString map() const { return map_; }
    // "24 of 48 MoE layers on the GPU (layers 24-47), 24 on the CPU (0-23)"; empty without a map.
    QString reading() const;

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    QString map_;
};

// "0-23, 30, 40-47": the layers whose character in `map` is `kind`.
QString layerRanges(const QString& map, QChar kind);

}  // namespace tandem::ui
