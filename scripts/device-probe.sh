#!/usr/bin/env bash
# One-off device call (ninth session): batched decode on the GPU with the routed experts on the CPU, after
# the batch graphs went unchained. Build first with device-gpu-check.sh.
set -u
out=${OUT:-/tmp/tandem-out}
cli=/tmp/tandem-build/app/tandem-cli
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
echo "== serve --batch 4, Pocket Dictionary, experts on the CPU (--gpu-memory 0)"
timeout 45 python3 scripts/check_batched_decode.py --cli "$cli" --model resources/models/pocket-dictionary --device gpu \
  --gpu-memory 0 --batch 4 2>&1 | tail -4
echo "== bench --streams 1,4, qwen3-30b-a3b-8l"
TANDEM_DEBUG_STACKS=1 timeout 90 "$cli" bench --synthetic qwen3-30b-a3b-8l --experts int4 --streams 1,4 --prompt 64 --gen 32 \
  --device gpu --gpu-memory 0 2>&1 | grep -v "^measuring\|^building" | tail -14
