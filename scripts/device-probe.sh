#!/usr/bin/env bash
# One-off device call (twelfth session, last): the chosen GPU (--gpus). After `CHECKS=0 BENCH=0
# scripts/device-gpu-check.sh` (the build): the Pocket Dictionary's greedy ids by default, with --gpus 0
# and with 2 logical stages (equal); --gpus 1 on this one-GPU machine (the CPU, with the reason; an error
# with --device gpu); every fixture on the GPU; decode speed with --gpus 0 against the default.
set -u
out=${OUT:-/tmp/tandem-out}
cli=/tmp/tandem-build/app/tandem-cli
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
ids="1 393 264 201 337 372 322 82 265 899 288 316 33 2 201 1 527 644 201"
gen() { "$cli" generate --model resources/models/pocket-dictionary --ids "$ids" --new-tokens 48 --temperature 0 "$@"; }
for v in "" "--gpus 0" "--gpus 0 --device gpu"; do
  echo "greedy ids, ${v:-default}: $(gen $v 2>"$out/gen.log" | md5sum | cut -c1-8) $(grep -m1 -o ' on .*' "$out/gen.log")"
done
echo "greedy ids, TANDEM_GPU_STAGES=2 --gpus 0: $(TANDEM_GPU_STAGES=2 gen --gpus 0 2>/dev/null | md5sum | cut -c1-8)"
echo "greedy ids, --device cpu: $(gen --device cpu 2>/dev/null | md5sum | cut -c1-8)"
echo "--gpus 1 (auto): $(gen --gpus 1 2>&1 >/dev/null | grep -m1 note)"
gen --gpus 1 --device gpu >/dev/null 2>"$out/gpu1.log"; echo "--gpus 1 --device gpu: exit $?, $(tail -1 "$out/gpu1.log")"
echo "--gpus 0,1 (auto): $(gen --gpus 0,1 2>&1 >/dev/null | grep -m1 note)"
echo "== check_golden --device gpu"
timeout 200 python3 scripts/check_golden.py --cli "$cli" --fixtures tests/fixtures --device gpu 2>&1 | tee "$out/golden.txt" |
  grep -E "runs checked|FAIL|UNEXPL"
for v in "" "--gpus 0"; do
  timeout 120 "$cli" bench --synthetic qwen3-30b-a3b-8l --experts int4 --prompt 512 --gen 64 --device gpu --gpu-memory 0 $v \
    >"$out/bench.txt" 2>&1
  echo "bench 8l ${v:-default}: $(grep -E '^  decode' "$out/bench.txt" | awk '{print $2}' | paste -sd' ') tok/s; $(grep -m1 -o ' on NVIDIA[^,]*' "$out/bench.txt")"
done
