#!/usr/bin/env bash
# One-off device call (eleventh session): issue 28's prompt attention kernels after the staging rewrite
# (K and V row-major with 8-byte stores, fragments by ldmatrix / ldmatrix.trans, Q held in registers,
# exp2): check_attention --prefill against float64 with the new kernels and with the previous ones
# (.oldattn: HEAD~1's attention_prefill.cu, mla_prefill.cu and mma.cuh, carried), then bench's long prompts
# with the default (split) attention: qwen3-30b-a3b-128k and deepseek-v2-lite at 512, 16384 and 65536.
# Build first with device-gpu-check.sh (CHECKS=0 BENCH=0).
set -u
out=${OUT:-/tmp/tandem-out}
build=/tmp/tandem-build
cli=$build/app/tandem-cli
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
t0=$(date +%s)
nvcc -std=c++20 -arch=sm_90 -O3 -Iengine -Iengine/include scripts/check_attention.cu -o "$build/check-attention" \
  >"$out/check-attention-build.log" 2>&1 || tail -20 "$out/check-attention-build.log"
if [[ -d .oldattn ]]; then
  nvcc -std=c++20 -arch=sm_90 -O3 -I.oldattn/engine -Iengine -Iengine/include scripts/check_attention.cu -o "$build/check-attention-old" \
    >"$out/check-attention-old-build.log" 2>&1 || tail -20 "$out/check-attention-old-build.log"
fi
for v in new old; do
  exe=$build/check-attention; [[ $v == old ]] && exe=$build/check-attention-old
  [[ -x $exe ]] || continue
  echo "== check_attention --prefill ($v kernels, $(( $(date +%s) - t0 )) s)"
  timeout 100 "$exe" --prefill >"$out/check-attention-$v.txt" 2>&1; echo "rc $?"
  cut -c1-118 "$out/check-attention-$v.txt"
done
for shape in qwen3-30b-a3b-128k deepseek-v2-lite; do
  echo "== bench $shape ($(( $(date +%s) - t0 )) s)"
  timeout 200 "$cli" bench --synthetic $shape --experts int4 --prompt 512,512,16384,65536 --gen 16 --device gpu \
    --gpu-memory 1G --no-warmup >"$out/bench-$shape.txt" 2>&1; echo "rc $?"
  grep -E "^\| |prefill|decode" "$out/bench-$shape.txt" | tail -14 | cut -c1-150
done
echo "done ($(( $(date +%s) - t0 )) s)"
