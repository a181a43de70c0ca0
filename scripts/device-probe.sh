#!/usr/bin/env bash
# One-off device call (tenth session, the last): issue 27's streams on the full qwen3-30b-a3b shape a third
# time, gpt-oss-120b at d = 0 twice more, and the pipeline's merged profile (TANDEM_GPU_STAGES=2, the
# between-steps figure). The call before it (commit 7098a7c's version of this script) checked the
# pipeline: every fixture with 2 and 3 stages, greedy ids with 1-3 stages. Build first with
# device-gpu-check.sh.
set -u
out=${OUT:-/tmp/tandem-out}
cli=/tmp/tandem-build/app/tandem-cli
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
echo "== bench --streams 1,4,8 qwen3-30b-a3b (c)"
timeout 200 "$cli" bench --synthetic qwen3-30b-a3b --experts int4 --streams 1,4,8 --prompt 64 --gen 48 --device gpu \
  --gpu-memory 0 2>&1 | tee "$out/streams-c.txt" | grep -E "aggregate|-> |GPU's clocks" | sed -E 's/\(estimated[^)]*\), //' | cut -c1-200
echo "== bench qwen3-30b-a3b-8l, TANDEM_GPU_STAGES=2"
TANDEM_GPU_STAGES=2 timeout 100 "$cli" bench --synthetic qwen3-30b-a3b-8l --experts int4 --prompt 1 --gen 64 --device gpu \
  --gpu-memory 0 2>&1 | tee "$out/bench-stages2.txt" | grep -E "^  (decode|step)" | cut -c1-160
echo "== gpt-oss-120b --defer 0,0"
timeout 200 "$cli" bench --synthetic gpt-oss-120b --experts mxfp4 --prompt 1 --gen 64 --device gpu --gpu-memory 0 --defer 0,0 \
  2>&1 | tee "$out/gptoss.txt" | grep -E "^  (decode|ceiling|step)" | cut -c1-200
