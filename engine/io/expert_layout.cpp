#include "io/expert_layout.h"

#include <string>

#include "tandem/error.h"

namespace tandem::io {

namespace {

std::size_t roundUp(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace

std::string_view expertTypeName(ExpertType type) {
    switch (type) {
    case ExpertType::BF16: return "bf16";
    case ExpertType::INT8: return "int8";
    case ExpertType::INT4: return "int4";
    case ExpertType::MXFP4: return "mxfp4";
    }
    return "?";
}

std::optional<ExpertType> parseExpertType(std::string_view name) {
    for (const ExpertType t : kAllExpertTypes)
        if (expertTypeName(t) == name) return t;
    return std::nullopt;
}

ExpertLayout ExpertLayout::make(ExpertType type, int hidden, int inter) {
    if (hidden <= 0 || inter <= 0)
        throw Error("an expert needs positive dimensions, not hidden " + std::to_string(hidden) + " x intermediate " +
                    std::to_string(inter));
    ExpertLayout l;
    l.type = type;
    l.hidden = hidden;
    l.inter = inter;
    l.kBlock = blockColumns(type);
    l.blockBytes = blockBytesOf(type);
    l.hiddenPad = static_cast<int>(roundUp(static_cast<std::size_t>(hidden), static_cast<std::size_t>(l.kBlock)));
    l.interPad = static_cast<int>(roundUp(static_cast<std::size_t>(inter), 64));
    l.gateUpPanels = l.interPad / kPanelRows;
    const std::size_t rowScales = type == ExpertType::INT8 ? 2 * kPanelRows * sizeof(float) : 0;
    l.gateUpPanelBytes = static_cast<std::size_t>(l.hiddenKBlocks()) * 2 * l.blockBytes + rowScales;
    l.downPanels = (hidden + kPanelRows - 1) / kPanelRows;
    l.chunks = (l.interPad + kChunkCols - 1) / kChunkCols;
    l.downOffset = static_cast<std::size_t>(l.gateUpPanels) * l.gateUpPanelBytes;
    l.downScalesOffset = l.chunkOffset(l.chunks);
    l.dataBytes = l.downScalesOffset +
                  (type == ExpertType::INT8 ? static_cast<std::size_t>(l.downPanels) * kPanelRows * sizeof(float) : 0);
    l.expertBytes = roundUp(l.dataBytes, kExpertAlignment);
    return l;
}

}  // namespace tandem::io
