#!/usr/bin/env bash
# One-off device call (tenth session, the last): issue 29's pipeline with each stage's own weights (the
# backend plans TANDEM_GPU_STAGES logical GPUs with planStages and uploads each stage's layers alone):
# every fixture against its golden with 2 stages and with 3 (every expert on the CPU, through each
# stage's bridge), greedy ids of the Pocket Dictionary with 1, 2 and 3 stages (d = 0 and 1), and the stage
# lines bench prints. Build first with device-gpu-check.sh.
set -u
out=${OUT:-/tmp/tandem-out}
cli=/tmp/tandem-build/app/tandem-cli
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
echo "== check_golden, TANDEM_GPU_STAGES=2"
TANDEM_GPU_STAGES=2 timeout 100 python3 scripts/check_golden.py --cli "$cli" --fixtures tests/fixtures --device gpu 2>&1 |
  tee "$out/golden-stages2.txt" | grep -E "runs checked|FAIL|UNEXPL" | cut -c1-120
echo "== check_golden, TANDEM_GPU_STAGES=3 --gpu-memory 0"
TANDEM_GPU_STAGES=3 timeout 100 python3 scripts/check_golden.py --cli "$cli" --fixtures tests/fixtures --device gpu --gpu-memory 0 2>&1 |
  tee "$out/golden-stages3.txt" | grep -E "runs checked|FAIL|UNEXPL" | cut -c1-120
echo "== greedy ids, Pocket Dictionary, --gpu-memory 0"
ids="1 393 264 201 337 372 322 82 265 899 288 316 33 2 201 1 527 644 201"
for st in 1 2 3; do
  for d in 0 1; do
    TANDEM_GPU_STAGES=$st timeout 60 "$cli" generate --model resources/models/pocket-dictionary --ids "$ids" --new-tokens 48 --temperature 0 \
      --device gpu --gpu-memory 0 --defer $d >"$out/gen-$st-$d.txt" 2>"$out/gen-$st-$d.err"
    echo "stages $st d $d: $(md5sum <"$out/gen-$st-$d.txt" | cut -c1-8) $(grep -c "pipeline stage" "$out/gen-$st-$d.err") stage lines"
  done
done
grep "pipeline stage" "$out/gen-3-0.err" | cut -c1-160
echo "== bench qwen3-30b-a3b-8l, TANDEM_GPU_STAGES=2"
TANDEM_GPU_STAGES=2 timeout 60 "$cli" bench --synthetic qwen3-30b-a3b-8l --experts int4 --prompt 1 --gen 64 --device gpu \
  --gpu-memory 0 2>&1 | tee "$out/bench-stages2.txt" | grep -E "^  (decode|step)|pipeline" | cut -c1-160
