#!/usr/bin/env bash
# One-off device call (eleventh session, third call): issue 28's MLA prompt kernel with Q's hi fragments in
# registers, its hi plane staged in K's (112 KB of shared memory with split: two blocks a multiprocessor)
# and four loads in flight a thread; check_attention --prefill against float64, the fixtures against their
# goldens on the GPU, check_long_context.py at 8192 tokens (default split attention), then bench's long
# prompts: deepseek-v2-lite and qwen3-30b-a3b-128k at 512, 16384 and 65536 tokens. Build first with
# device-gpu-check.sh (CHECKS=0 BENCH=0).
set -u
out=${OUT:-/tmp/tandem-out}
build=/tmp/tandem-build
cli=$build/app/tandem-cli
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
t0=$(date +%s)
nvcc -std=c++20 -arch=sm_90 -O3 -Iengine -Iengine/include scripts/check_attention.cu -o "$build/check-attention" \
  >"$out/check-attention-build.log" 2>&1 || tail -20 "$out/check-attention-build.log"
echo "== check_attention --prefill ($(( $(date +%s) - t0 )) s)"
timeout 100 "$build/check-attention" --prefill >"$out/check-attention.txt" 2>&1; echo "rc $?"
grep -E "qwen3 2048|FAILED|within" "$out/check-attention.txt" | cut -c1-118
grep -A20 "^MLA prefill" "$out/check-attention.txt" | cut -c1-118
echo "== check_golden --device gpu ($(( $(date +%s) - t0 )) s)"
timeout 120 python3 scripts/check_golden.py --cli "$cli" --fixtures tests/fixtures --device gpu 2>&1 |
  tee "$out/golden.txt" | grep -E "runs checked|FAIL|UNEXPL" | cut -c1-120
echo "== long context 8192, split (default) ($(( $(date +%s) - t0 )) s)"
timeout 150 python3 scripts/check_long_context.py --cli "$cli" --fixtures tests/fixtures --device cpu --device gpu --tokens 8192 2>&1 |
  grep -v Warning >"$out/long-split.txt"; echo "rc $?"; grep -E "^tiny|within|FAIL" "$out/long-split.txt" | cut -c1-150
for shape in deepseek-v2-lite qwen3-30b-a3b-128k; do
  echo "== bench $shape ($(( $(date +%s) - t0 )) s)"
  timeout 200 "$cli" bench --synthetic $shape --experts int4 --prompt 512,512,16384,65536 --gen 16 --device gpu \
    --gpu-memory 1G --no-warmup >"$out/bench-$shape.txt" 2>&1; echo "rc $?"
  grep "^|" "$out/bench-$shape.txt" | sed 's/.*prompts[^|]*|//' | tail -9
done
echo "done ($(( $(date +%s) - t0 )) s)"
