#!/usr/bin/env bash
# One-off device call (kernels alone; needs nothing else built): check_attention's decode cases, twice,
# with the "int8 cache, codes" lines printed (us a launch with L2 flushed; every case must stay within
# bounds). PROBE_AFTER=FILE waits for FILE before the timed runs (an engine build started beside the compile:
# rm -f /tmp/built; (CHECKS=0 BENCH=0 scripts/device-gpu-check.sh >$OUT/build.txt; touch /tmp/built) &
# PROBE_AFTER=/tmp/built scripts/device-probe.sh). Earlier probes and their results (MLA decode's ldmatrix
# variant, ncu of MLA decode on codes, codes read by byte permutes against conversions): docs/BENCHMARKS.md,
# "The GPU's 8-bit cache on the H200".
set -u
out=${OUT:-/tmp/tandem-out}
rm -f /tmp/ca  # a warm machine keeps the last probe's: a failed build must not run it
nvcc -std=c++20 -arch=sm_90 -O3 -Iengine -Iengine/include scripts/check_attention.cu -o /tmp/ca >"$out/nvcc.log" 2>&1 ||
  { tail -20 "$out/nvcc.log"; exit 1; }
while [[ -n ${PROBE_AFTER:-} && ! -e $PROBE_AFTER ]]; do sleep 1; done
for round in 1 2; do
  echo "== round $round"
  /tmp/ca --only "decode after" >"$out/decode-$round.txt" 2>&1
  awk '/^[a-zA-Z]/{name=$0} /codes|FAIL|bounds/{print substr(name,1,34) " |" $0}' "$out/decode-$round.txt" | cut -c1-150
done
