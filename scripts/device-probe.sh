#!/usr/bin/env bash
# One-off device call (tenth session): the projection biases added in the decode GEMV's epilogue (gpt-oss,
# GLM) checked on their fixtures (bf16 and int8 dense), gpt-oss-120b-8l's stage profile after it,
# gpt-oss-120b (full shape) at deferral 0 three times and 1 once, and issue 27's streams on the full
# qwen3-30b-a3b shape twice (two processes). Build first with device-gpu-check.sh.
set -u
out=${OUT:-/tmp/tandem-out}
cli=/tmp/tandem-build/app/tandem-cli
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
for dense in checkpoint int8; do
  echo "== check_golden tiny-gpt-oss tiny-glm4moe on the GPU, --dense $dense"
  timeout 120 python3 scripts/check_golden.py --cli "$cli" tests/fixtures/tiny-gpt-oss tests/fixtures/tiny-glm4moe --device gpu \
    $([[ $dense == int8 ]] && echo --dense int8) 2>&1 | tee -a "$out/golden.txt" | grep -E "tiny|FAIL|within|UNEXPL" | cut -c1-160 | head -12
done
streams() {
  echo "== bench --streams 1,4,8 qwen3-30b-a3b ($1)"
  timeout 200 "$cli" bench --synthetic qwen3-30b-a3b --experts int4 --streams 1,4,8 --prompt 64 --gen 48 --device gpu \
    --gpu-memory 0 2>&1 | tee "$out/streams-$1.txt" | grep -E "aggregate|-> |GPU's clocks" | sed -E 's/\(estimated[^)]*\), //' | cut -c1-200
}
streams a
echo "== gpt-oss-120b-8l stage profile"
TANDEM_GPU_PROFILE=1 timeout 90 "$cli" bench --synthetic gpt-oss-120b-8l --experts mxfp4 --prompt 1 --gen 64 --device gpu \
  --gpu-memory 0 --no-warmup 2>&1 | tee "$out/gptoss-profile.txt" | grep -A9 "GPU stages of a decode step (ms per step, summed over the MoE layers, 64" | head -10
grep -E "^  (decode|ceiling|step)" "$out/gptoss-profile.txt"
echo "== gpt-oss-120b --defer 0,0,0,1"
timeout 240 "$cli" bench --synthetic gpt-oss-120b --experts mxfp4 --prompt 1 --gen 64 --device gpu --gpu-memory 0 --defer 0,0,0,1 \
  2>&1 | tee "$out/gptoss.txt" | grep -E "^  (decode|ceiling|step)" | cut -c1-200
streams b
