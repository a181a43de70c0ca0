#!/usr/bin/env bash
# One-off device call (twelfth session, last): every GPU (--gpus all, TANDEM_GPU_DEVICES=all) on this
# one-GPU machine is GPU 0; the fixtures on the GPU, alone and with 2 logical stages. After `CHECKS=0
# BENCH=0 scripts/device-gpu-check.sh` (the build).
set -u
out=${OUT:-/tmp/tandem-out}
cli=/tmp/tandem-build/app/tandem-cli
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
ids="1 393 264 201 337 372 322 82 265 899 288 316 33 2 201 1 527 644 201"
gen() { "$cli" generate --model resources/models/pocket-dictionary --ids "$ids" --new-tokens 48 --temperature 0 "$@"; }
echo "greedy ids, default: $(gen 2>"$out/gen.log" | md5sum | cut -c1-8) $(grep -m1 -o ' on .*' "$out/gen.log")"
echo "greedy ids, --gpus all --device gpu: $(gen --gpus all --device gpu 2>"$out/gen.log" | md5sum | cut -c1-8) $(grep -m1 -o ' on .*' "$out/gen.log")"
echo "greedy ids, TANDEM_GPU_DEVICES=all: $(TANDEM_GPU_DEVICES=all gen 2>"$out/gen.log" | md5sum | cut -c1-8) $(grep -m1 -o ' on .*' "$out/gen.log")"
for v in "" "TANDEM_GPU_STAGES=2"; do
  echo "== check_golden --device gpu ${v:-(one stage)}"
  env $v timeout 200 python3 scripts/check_golden.py --cli "$cli" --fixtures tests/fixtures --device gpu 2>&1 | tee -a "$out/golden.txt" |
    grep -E "runs checked|FAIL|UNEXPL"
done
