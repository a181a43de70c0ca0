#!/usr/bin/env bash
# One-off device call, prepared for the next session: MLA decode's ldmatrix variant against the default
# (TANDEM_MLA_DECODE_LDMATRIX, engine/cuda/mla_decode.cu), kernels alone: check_attention built both ways,
# the MLA decode cases of each (errors and us a launch), then ncu's issue figures of the variant after 64K.
# Needs nothing else built.
set -u
out=${OUT:-/tmp/tandem-out}
for v in 0 1; do
  nvcc -std=c++20 -arch=sm_90 -O3 -DTANDEM_MLA_DECODE_LDMATRIX=$v -Iengine -Iengine/include scripts/check_attention.cu \
    -o /tmp/ca$v >"$out/nvcc$v.log" 2>&1 || { tail -5 "$out/nvcc$v.log"; exit 1; }
done
for round in 1 2; do
  for v in 0 1; do
    echo "== ldmatrix $v, round $round"
    /tmp/ca$v --only "decode after" 2>&1 | tee -a "$out/mla-ab.txt" |
      awk '/^MLA decode/{m=1} /bounds|FAIL/{print} m && /decode after|tensor cores/{print}' | cut -c1-110
  done
done
timeout 100 ncu --clock-control none -k regex:mlaSplitDecode -c 1 --section SpeedOfLight --section SchedulerStats \
  --section WarpStateStats /tmp/ca1 --only "v2-lite decode after 65536" >"$out/ncu-mla1.txt" 2>&1
grep -E "Duration|DRAM Throughput|Issued Warp|Warp Cycles Per Issued" "$out/ncu-mla1.txt"
