#!/usr/bin/env bash
# One-off device call (eleventh session, fourth call): issue 28's MLA decode kernel with V's fragments by
# ldmatrix.trans and the next tile's rows loaded into registers during this tile's products (half of
# them: -DTANDEM_MLA_DECODE_PREFETCH=18, the default, against 24), check_attention's decode cases against
# float64, the fixtures against their goldens on the GPU, check_long_context.py at 8192 tokens, then bench's
# long prompts for deepseek-v2-lite (decode after 512, 16384 and 65536). Build first with
# device-gpu-check.sh (CHECKS=0 BENCH=0).
set -u
out=${OUT:-/tmp/tandem-out}
build=/tmp/tandem-build
cli=$build/app/tandem-cli
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
t0=$(date +%s)
for pf in 18 24; do
  nvcc -std=c++20 -arch=sm_90 -O3 -DTANDEM_MLA_DECODE_PREFETCH=$pf -Iengine -Iengine/include scripts/check_attention.cu \
    -o "$build/check-attention-$pf" >"$out/check-attention-build-$pf.log" 2>&1 || tail -20 "$out/check-attention-build-$pf.log"
done
for pf in 18 24; do
  echo "== check_attention --only decode, prefetch $pf ($(( $(date +%s) - t0 )) s)"
  timeout 100 "$build/check-attention-$pf" --only decode >"$out/check-attention-$pf.txt" 2>&1; echo "rc $?"
  grep -E "v2-lite|v3 |mla |FAILED|within" "$out/check-attention-$pf.txt" | cut -c1-130
done
echo "== check_golden --device gpu ($(( $(date +%s) - t0 )) s)"
timeout 120 python3 scripts/check_golden.py --cli "$cli" --fixtures tests/fixtures --device gpu 2>&1 |
  tee "$out/golden.txt" | grep -E "runs checked|FAIL|UNEXPL" | cut -c1-120
echo "== long context 8192 ($(( $(date +%s) - t0 )) s)"
timeout 150 python3 scripts/check_long_context.py --cli "$cli" --fixtures tests/fixtures --device cpu --device gpu --tokens 8192 2>&1 |
  grep -v Warning >"$out/long-split.txt"; echo "rc $?"; grep -E "^tiny|within|FAIL" "$out/long-split.txt" | cut -c1-150
for shape in deepseek-v2-lite; do
  echo "== bench $shape ($(( $(date +%s) - t0 )) s)"
  timeout 200 "$cli" bench --synthetic $shape --experts int4 --prompt 512,512,16384,65536 --gen 16 --device gpu \
    --gpu-memory 1G --no-warmup >"$out/bench-$shape.txt" 2>&1; echo "rc $?"
  grep "^|" "$out/bench-$shape.txt" | sed 's/.*prompts[^|]*|//' | tail -9
  grep -E "^  (ceiling|step)" "$out/bench-$shape.txt" | cut -c1-170
done
echo "done ($(( $(date +%s) - t0 )) s)"
