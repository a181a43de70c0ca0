#!/usr/bin/env bash
# One-off device call (tenth session, last): issue 29's pipeline by layer on one GPU (TANDEM_GPU_STAGES):
# every fixture against its golden with 2 stages (experts placed as by default) and 3 stages (every
# expert on the CPU, through each stage's bridge); greedy ids of the Pocket Dictionary with 1, 2 and 3
# stages (equal at d = 0); bench of qwen3-30b-a3b-8l with 1 and 2 stages. Build first with
# device-gpu-check.sh.
set -u
out=${OUT:-/tmp/tandem-out}
cli=/tmp/tandem-build/app/tandem-cli
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
echo "== check_golden, TANDEM_GPU_STAGES=2"
TANDEM_GPU_STAGES=2 timeout 150 python3 scripts/check_golden.py --cli "$cli" --fixtures tests/fixtures --device gpu 2>&1 |
  tee "$out/golden-stages2.txt" | grep -E "^tiny|runs checked|FAIL|UNEXPL" | cut -c1-120
echo "== check_golden, TANDEM_GPU_STAGES=3 --gpu-memory 0"
TANDEM_GPU_STAGES=3 timeout 150 python3 scripts/check_golden.py --cli "$cli" --fixtures tests/fixtures --device gpu --gpu-memory 0 2>&1 |
  tee "$out/golden-stages3.txt" | grep -E "^tiny|runs checked|FAIL|UNEXPL" | cut -c1-120
echo "== greedy ids, Pocket Dictionary, --gpu-memory 0"
ids="1 393 264 201 337 372 322 82 265 899 288 316 33 2 201 1 527 644 201"
for st in 1 2 3; do
  for d in 0 1; do
    TANDEM_GPU_STAGES=$st timeout 60 "$cli" generate --model resources/models/pocket-dictionary --ids "$ids" --new-tokens 48 --temperature 0 \
      --device gpu --gpu-memory 0 --defer $d >"$out/gen-$st-$d.txt" 2>"$out/gen-$st-$d.err"
    echo "stages $st d $d: $(md5sum <"$out/gen-$st-$d.txt" | cut -c1-8) $(tail -1 "$out/gen-$st-$d.err" | cut -c1-100)"
  done
done
for st in 1 2; do
  echo "== bench qwen3-30b-a3b-8l, TANDEM_GPU_STAGES=$st"
  TANDEM_GPU_STAGES=$st timeout 100 "$cli" bench --synthetic qwen3-30b-a3b-8l --experts int4 --prompt 512 --gen 64 --device gpu \
    --gpu-memory 0 2>&1 | tee "$out/bench-stages$st.txt" | grep -E "^  (prefill|decode|step)" | cut -c1-160
done
