#!/usr/bin/env bash
# One-off device call (eleventh session): issue 28's prompt attention kernels after the staging rewrite
# (K and V row-major with 8-byte stores, fragments by ldmatrix / ldmatrix.trans, Q held in registers,
# exp2): scripts/check_attention.cu against float64 (now with 16K and 64K chunks, split and one-term P·V,
# and TFLOP/s), the fixtures against their goldens on the GPU, then check_long_context.py at 8192 tokens
# with the default split attention and with the long-context knob (Q·K split, P·V one fp16 term). Build
# first with device-gpu-check.sh (CHECKS=0 BENCH=0).
set -u
out=${OUT:-/tmp/tandem-out}
build=/tmp/tandem-build
cli=$build/app/tandem-cli
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
t0=$(date +%s)
echo "== check_attention"
nvcc -std=c++20 -arch=sm_90 -O3 -Iengine -Iengine/include scripts/check_attention.cu -o "$build/check-attention" \
  >"$out/check-attention-build.log" 2>&1 || tail -20 "$out/check-attention-build.log"
timeout 150 "$build/check-attention" >"$out/check-attention.txt" 2>&1
echo "rc $? ($(( $(date +%s) - t0 )) s)"
sed -n '1,/^$/p' "$out/check-attention.txt" | cut -c1-120
grep -A22 "^MLA prefill" "$out/check-attention.txt" | cut -c1-120
grep -E "FAILED|all within" "$out/check-attention.txt" | head -20
echo "== check_golden --device gpu"
timeout 120 python3 scripts/check_golden.py --cli "$cli" --fixtures tests/fixtures --device gpu 2>&1 |
  tee "$out/golden.txt" | grep -E "runs checked|FAIL|UNEXPL" | cut -c1-120
echo "== long context 8192, split (default) ($(( $(date +%s) - t0 )) s)"
timeout 200 python3 scripts/check_long_context.py --cli "$cli" --fixtures tests/fixtures --device cpu --device gpu --tokens 8192 2>&1 |
  grep -v Warning >"$out/long-split.txt"; echo "rc $?"; tail -22 "$out/long-split.txt" | cut -c1-150
echo "== long context 8192, TANDEM_GPU_SPLIT_ATTENTION_UNTIL=2048 ($(( $(date +%s) - t0 )) s)"
TANDEM_GPU_SPLIT_ATTENTION_UNTIL=2048 timeout 200 python3 scripts/check_long_context.py --cli "$cli" --fixtures tests/fixtures \
  --device cpu --device gpu --tokens 8192 2>&1 | grep -v Warning >"$out/long-oneterm.txt"; echo "rc $?"
tail -22 "$out/long-oneterm.txt" | cut -c1-150
echo "done ($(( $(date +%s) - t0 )) s)"
