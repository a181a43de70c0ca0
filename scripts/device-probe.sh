#!/usr/bin/env bash
# One-off device call, prepared for the next session (kernels alone; needs nothing else built):
# - the GPU's 8-bit KV cache (issue 28, AttentionArgs::int8Cache): check_attention's decode cases now also run
#   the runner's int8 path, its float32 rows (launchGqaPrepare's quantized writes, launchDequantizeRows) and
#   the kernels that read the codes (key-head GQA for heads of 128, MLA's tensor-core decode), and check
#   launchMlaPrepare's int8 writes; the "int8 cache" lines give the quantization's error, us a launch and
#   the codes' kernel against the rows' (must be float32-close);
# - MLA decode's ldmatrix variant against the default (TANDEM_MLA_DECODE_LDMATRIX, engine/cuda/mla_decode.cu);
# then ncu's issue figures of the MLA decode kernel on int8 codes after 64K.
# Next, with the engine built: KV8=1 CHECKS=0 BENCH=0 scripts/device-gpu-check.sh (fixtures, quality, bench).
set -u
out=${OUT:-/tmp/tandem-out}
pids=()
for v in 0 1; do
  rm -f /tmp/ca$v  # a warm machine keeps the last probe's: a failed build must not run them
  nvcc -std=c++20 -arch=sm_90 -O3 -DTANDEM_MLA_DECODE_LDMATRIX=$v -Iengine -Iengine/include scripts/check_attention.cu \
    -o /tmp/ca$v >"$out/nvcc$v.log" 2>&1 &
  pids+=($!)
done
for v in 0 1; do wait "${pids[$v]}" || { tail -20 "$out/nvcc$v.log"; exit 1; }; done
# PROBE_AFTER=FILE: wait for FILE before the timed runs (an engine build started beside the compiles).
while [[ -n ${PROBE_AFTER:-} && ! -e $PROBE_AFTER ]]; do sleep 1; done
/tmp/ca0 --only "decode after" >"$out/decode0.txt" 2>&1
echo "rc $?"
awk '/^[a-zA-Z]/{name=$0} /int8|FAIL|bounds/{print substr(name,1,60) " |" $0}' "$out/decode0.txt" | cut -c1-200
for round in 1 2; do
  for v in 0 1; do
    echo "== ldmatrix $v, round $round"
    /tmp/ca$v --only "v2-lite decode after" 2>&1 | tee -a "$out/mla-ab.txt" |
      awk '/bounds|FAIL/{print} /decode after|tensor cores|codes/{print}' | cut -c1-130
  done
done
timeout 100 ncu --clock-control none --kernel-name-base mangled -k regex:mlaSplitDecodeKernelILb1ELb1E -c 1 \
  --section SpeedOfLight --section SchedulerStats --section WarpStateStats /tmp/ca0 --only "v2-lite decode after 65536" \
  >"$out/ncu-mla.txt" 2>&1
grep -E "mlaSplit|Duration|DRAM Throughput|Issued Warp|Warp Cycles Per Issued" "$out/ncu-mla.txt"
