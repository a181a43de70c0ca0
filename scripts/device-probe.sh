#!/usr/bin/env bash
# One-off device call (twelfth session, first call): after `PEER=1 PEER_ONLY=none CHECKS=0 BENCH=0
# scripts/device-gpu-check.sh` (the build; llama.cpp's build started in the background, the GGUF and its
# store made): serve --batch 4 on the GPU (the sessions' reservation) against each request alone, the
# fixtures on the GPU, then wait for llama-bench until DEADLINE (epoch seconds).
set -u
out=${OUT:-/tmp/tandem-out}
cli=/tmp/tandem-build/app/tandem-cli
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
echo "== serve --batch 4 on the GPU"
timeout 150 python3 scripts/check_batched_decode.py --cli "$cli" --model resources/models/pocket-dictionary --device gpu 2>&1 |
  tee "$out/batched-decode.txt" | tail -6
echo "== serve --batch 4 on the GPU, --gpu-memory 0"
timeout 150 python3 scripts/check_batched_decode.py --cli "$cli" --model resources/models/pocket-dictionary --device gpu \
  --gpu-memory 0 2>&1 | tee "$out/batched-decode-0.txt" | tail -3
echo "== check_golden --device gpu"
timeout 200 python3 scripts/check_golden.py --cli "$cli" --fixtures tests/fixtures --device gpu 2>&1 | tee "$out/golden.txt" |
  grep -E "runs checked|FAIL|UNEXPL"
lb=/tmp/lcpp/build/bin/llama-bench
while [[ ! -x $lb && $(date +%s) -lt ${DEADLINE:-0} ]]; do sleep 5; done
echo "llama-bench: $([[ -x $lb ]] && echo built || echo "not yet: $(tail -c 200 /tmp/peer/lcpp-build.log | tr '\n' ' ')")"
ls /tmp/peer
