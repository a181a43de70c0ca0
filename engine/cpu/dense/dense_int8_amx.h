#pragma once
// The dense layers' int8 products on AMX for prefill (many tokens): the same contract as
// denseInt8Avx512 (dense_avx512.h), with tdpbssd (signed int8 x signed int8 into int32) doing 16 rows x
// 16 tokens x 64 columns an instruction. The weights are the A tiles, read straight from the row-major
// matrix; the activations are the B tiles, packed once into VNNI order (packInt8ForAmx). Only call when
// selectedIsa() is Amx (cpu_features.h, which also asks Linux for the tile state); matmul.cpp decides.
#include <cstddef>
#include <cstdint>

#include "cpu/dense/dense_avx512.h"

namespace tandem::cpu {

// Whether denseInt8Amx takes a product: whole 64-column blocks (the A tiles read 64 columns of a row;
// a padded matrix would have to be copied), and enough tokens to fill a B tile's 16 (fewer are padded
// with zero tokens, wasted work, and the VNNI kernel is the better choice).
inline bool denseInt8AmxServes(std::size_t cols, std::size_t tokens) { return cols > 0 && cols % 64 == 0 && tokens >= 16; }

// Bytes of the packed activations for `tokens` tokens of `cols` columns (cols % 64 == 0): per group of
// 16 tokens (the last padded with zero tokens) and per 64 columns, one 1 KiB B tile.
inline std::size_t int8AmxPackedBytes(std::size_t cols, std::size_t tokens) { return (tokens + 15) / 16 * (cols / 64) * 1024; }

// Packs x's first `tokens` tokens over `cols` columns (cols % 64 == 0) into B tiles at `packed`
// (int8AmxPackedBytes, 64-byte aligned): the tile of token group g and column block k lies at
// (g * cols / 64 + k) * 1024; its row j holds, for each of the 16 tokens, the 4 bytes of columns
// 64k + 4j .. 64k + 4j + 3. Reads only q[t * ld + c] for t < tokens, c < cols. Needs AVX-512.
void packInt8ForAmx(const Int8Rows& x, std::size_t cols, std::size_t tokens, std::int8_t* packed);

// y[t * ldy + r] = rowScales[r] · scales[t] · Σ_c W[r, c] · q[t, c] for rows r in [r0, r1), tokens t in
// [0, tokens), the activations packed by packInt8ForAmx (so that the threads of one product can share
// one packing). W is int8 (any value, -128 included), row-major [rows][cols], `w` at row 0;
// cols % 64 == 0. Any row range and token count work; reads W only in rows [r0, r1).
void denseInt8AmxPacked(const std::int8_t* w, const float* rowScales, std::size_t cols, std::size_t r0, std::size_t r1,
                        const std::int8_t* packed, const float* scales, std::size_t tokens, float* y, std::size_t ldy);

// The same from x as activationToInt8 leaves it, as denseInt8Avx512 takes it (x.sums is not needed):
// packs x into a per-thread buffer first, so each caller (thread) packs every token once.
// Precondition: cols % 64 == 0 (denseInt8AmxServes says when it pays).
void denseInt8Amx(const std::int8_t* w, const float* rowScales, std::size_t cols, std::size_t r0, std::size_t r1,
                  const Int8Rows& x, std::size_t tokens, float* y, std::size_t ldy);

}  // namespace tandem::cpu
