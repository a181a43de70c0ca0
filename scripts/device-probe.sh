#!/usr/bin/env bash
# One-off device call (eleventh session, fifth call): decode at depth on qwen3-30b-a3b-128k again (the GQA
# decode kernels are unchanged this session; a second sample of the machine's noise): prompts 512, 16384,
# 65536, then 512 and 16384 again in one process. Build first with device-gpu-check.sh (CHECKS=0 BENCH=0).
set -u
out=${OUT:-/tmp/tandem-out}
cli=/tmp/tandem-build/app/tandem-cli
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
timeout 200 "$cli" bench --synthetic qwen3-30b-a3b-128k --experts int4 --prompt 512,16384,65536,512,16384 --gen 32 --device gpu \
  --gpu-memory 1G >"$out/bench-qwen3.txt" 2>&1; echo "rc $?"
grep "^|" "$out/bench-qwen3.txt" | sed 's/.*prompts[^|]*|//' | tail -11
grep -E "^  (ceiling|step)" "$out/bench-qwen3.txt" | cut -c1-170
