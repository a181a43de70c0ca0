#pragma once
// Tandem's icon, drawn from the SVG in resources/ (the same file the hicolor theme gets in the package).
#include <QIcon>

namespace tandem::ui {

// Rendered once per size with Qt SVG, so it needs no image-format plugin at run time.
QIcon appIcon();

}  // namespace tandem::ui
