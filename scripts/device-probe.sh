#!/usr/bin/env bash
# One-off device call (kernels alone; needs nothing else built): the 8-bit KV cache's decode kernels with
# codes read by byte permutes (engine/cuda/kv_int8.cuh, the default) against the integer-to-float
# conversion (-DTANDEM_KV_CODES_BY_CONVERSION=1), alternated twice: check_attention's "decode after" cases,
# the "int8 cache, codes" lines (us a launch with L2 flushed; errors must stay within bounds and equal).
# PROBE_AFTER=FILE waits for FILE before the timed runs (an engine build started beside the compiles).
# Earlier probes (MLA decode's ldmatrix variant, ncu of MLA decode on codes): docs/BENCHMARKS.md.
set -u
out=${OUT:-/tmp/tandem-out}
pids=()
for v in 0 1; do
  rm -f /tmp/ca$v  # a warm machine keeps the last probe's: a failed build must not run them
  nvcc -std=c++20 -arch=sm_90 -O3 -DTANDEM_KV_CODES_BY_CONVERSION=$v -Iengine -Iengine/include scripts/check_attention.cu \
    -o /tmp/ca$v >"$out/nvcc$v.log" 2>&1 &
  pids+=($!)
done
for v in 0 1; do wait "${pids[$v]}" || { tail -20 "$out/nvcc$v.log"; exit 1; }; done
while [[ -n ${PROBE_AFTER:-} && ! -e $PROBE_AFTER ]]; do sleep 1; done
for round in 1 2; do
  for v in 0 1; do
    echo "== codes by conversion: $v, round $round"
    /tmp/ca$v --only "decode after" >"$out/decode$v-$round.txt" 2>&1
    awk '/^[a-zA-Z]/{name=$0} /codes|FAIL|bounds/{print substr(name,1,34) " |" $0}' "$out/decode$v-$round.txt" | cut -c1-150
  done
done
