#!/usr/bin/env bash
# One-off device call (twelfth session): decode at depth with the depths alternating in one process, so the
# machine's bandwidth drifting between runs shows in each pair: prompts 512 (a warm-up), then 512, 16384,
# 65536, 512, 16384, 65536, 512 for qwen3-30b-a3b-128k and deepseek-v2-lite. Build first with
# device-gpu-check.sh (CHECKS=0 BENCH=0).
set -u
out=${OUT:-/tmp/tandem-out}
cli=/tmp/tandem-build/app/tandem-cli
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
for s in qwen3-30b-a3b-128k deepseek-v2-lite; do
  timeout 280 "$cli" bench --synthetic "$s" --experts int4 --prompt 512,512,16384,65536,512,16384,65536,512 --gen 32 \
    --device gpu --gpu-memory 1G --no-warmup >"$out/depth-$s.txt" 2>&1; echo "$s rc $?"
  grep "^|" "$out/depth-$s.txt" | awk -F'|' '{print $8, $9}' | tail -17 | paste -sd' '
  grep -E "^  step" "$out/depth-$s.txt" | cut -c1-150
done
