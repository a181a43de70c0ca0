#!/usr/bin/env bash
# One-off device call (tenth session): issue 27's streams on the full qwen3-30b-a3b shape on a machine
# that ran nothing before (1,4,8 streams at deferral 0 and 1), the memory's huge pages while it runs, then
# gpt-oss-120b-8l's GPU stage profile (TANDEM_GPU_PROFILE=1) and the streams again after gpt-oss ran.
# Build first with device-gpu-check.sh.
set -u
out=${OUT:-/tmp/tandem-out}
cli=/tmp/tandem-build/app/tandem-cli
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
( for i in $(seq 1 40); do grep AnonHuge /proc/meminfo; sleep 5; done >"$out/thp.txt" ) &
echo "== bench --streams 1,4,8 qwen3-30b-a3b, --defer 0,1"
timeout 260 "$cli" bench --synthetic qwen3-30b-a3b --experts int4 --streams 1,4,8 --defer 0,1 --prompt 64 --gen 48 --device gpu \
  --gpu-memory 0 2>&1 | tee "$out/streams.txt" | grep -v "^measuring\|^building\|: prefill\|decode steps" | cut -c1-230
sort -u "$out/thp.txt" | tail -3
echo "== gpt-oss-120b-8l stage profile"
TANDEM_GPU_PROFILE=1 timeout 120 "$cli" bench --synthetic gpt-oss-120b-8l --experts mxfp4 --prompt 1 --gen 64 --device gpu \
  --gpu-memory 0 2>&1 | tee "$out/gptoss-profile.txt" | grep -A12 "GPU stages of a decode" | head -14
grep -E "^  (decode|ceiling|step)" "$out/gptoss-profile.txt"
