#pragma once
// convert --dense: how a store's model.safetensors holds the dense products (attention's projections,
// dense and shared MLPs, the output head: model::forEachDenseProduct). "checkpoint" writes them as the
// input has them; "int8" quantizes each row as the engine's --dense int8 does at load
// (cpu/dense/quantize_dense.h), so loading the store needs no quantizing and reads half of bf16's bytes
// from disk; "bf16" widens or rounds F32, F16, FP8 and GGUF-quantized products to bf16. Made row by row
// while the file is written, so memory stays a row or two.
#include <string>

#include "convert/convert_plan.h"

namespace tandem::convert {

// Throws tandem::Error for an unknown name. Replaces plan.denseTensors' products with the produced
// tensors: for int8, NAME (I8) and NAME + model::kRowScaleSuffix (F32, one per row); an FP8 product's
// NAME_scale_inv is left out, its values being folded in.
void storeDenseAs(ConversionPlan& plan, const std::string& dense);

}  // namespace tandem::convert
