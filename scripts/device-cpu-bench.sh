#!/usr/bin/env bash
# The CPU expert engine on the GPU machine's 16 Xeon cores (AMX), in one call: build tandem-cli,
# check the AMX and AVX-512 kernels against the scalar ones (bench-moe --verify: the test suites need
# Qt, which that machine lacks), time the GEMV/GEMM switch, run bench-moe for every shape and type at
# 1, 512 and 4096 tokens, run the PyTorch baseline at 512 and 4096, and print a short table last.
#
#   scripts/device-cpu-bench.sh [SOURCE_DIR]      (logs and JSON lines under $OUT, default /tmp/out)
#
# Everything lands in six files under $OUT (the device tool returns at most eight): machine.txt,
# build.log, logs.txt (every command's stderr), results.jsonl (every JSON line), sweep.txt, summary.txt.
# SOURCE_DIR may hold .devdeps/usr with headers and libraries the machine lacks (nlohmann json's
# headers and CMake files, numa.h and libnuma.so*), used only when the system has none.
# BENCH_SHAPES / BENCH_TYPES / BENCH_TOKENS narrow the runs; SKIP_SWEEP=1 and SKIP_TORCH=1 drop steps.
set -uo pipefail
src=$(cd "${1:-.}" && pwd)
out=${OUT:-/tmp/out}
build=/tmp/tandem-build
mkdir -p "$out"
shapes=${BENCH_SHAPES:-deepseek-v3 qwen3-30b-a3b deepseek-v2-lite}
types=${BENCH_TYPES:-bf16 int8 int4}
tokens=${BENCH_TOKENS:-1,512,4096}
log() { echo "== $*" | tee -a "$out/logs.txt"; }
# run NAME TIMEOUT CMD...: stdout kept in $out/NAME.tmp, stderr appended to logs.txt
run() {
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@" > "$out/$name.tmp" 2> "$out/$name.err"; local rc=$?
  cat "$out/$name.err" >> "$out/logs.txt"
  [[ $name == verify-* ]] || grep '^{' "$out/$name.tmp" >> "$out/results.jsonl"
  [[ $rc -eq 0 ]] || echo "$name: exit $rc: $(tail -2 "$out/$name.err")"
  return $rc
}

{ date -u; uname -a; lscpu; free -g; nproc; } > "$out/machine.txt" 2>&1
grep -E "Model name|^CPU\(s\)|Thread|Core|Socket|NUMA node|L2|L3|Flags" "$out/machine.txt" | cut -c1-200

deps=$src/.devdeps/usr
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DTANDEM_BUILD_TESTS=OFF)
if [[ -d $deps ]]; then
  [[ -f /usr/include/nlohmann/json.hpp ]] || cmake_args+=(-DCMAKE_PREFIX_PATH="$deps")
  if [[ ! -f /usr/include/numa.h ]]; then
    cmake_args+=(-DNUMA_INCLUDE_DIR="$deps/include" -DNUMA_LIBRARY="$deps/lib/libnuma.so")
    export LD_LIBRARY_PATH="$deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
fi
generator=(); command -v ninja >/dev/null && generator=(-G Ninja)
log "build ($(g++ --version | head -1))"
if ! { cmake -S "$src" -B "$build" "${generator[@]}" "${cmake_args[@]}" && cmake --build "$build" -j"$(nproc)"; } > "$out/build.log" 2>&1; then
  tail -40 "$out/build.log"; echo "BUILD FAILED"; exit 1
fi
cli=$build/app/tandem-cli

log "verify: AMX and AVX-512 kernels against the scalar ones"
for isa in amx avx512; do
  TANDEM_CPU_ISA=$isa run verify-$isa 120 "$cli" bench-moe --shape deepseek-v2-lite --experts bf16 --tokens 1 --verify --json \
    --seconds 0.1 --experts-in-memory 8
  grep -E '^verify:|FAILED' "$out/verify-$isa.err" | head -6
done

if [[ -z ${SKIP_SWEEP:-} ]]; then
  log "GEMV/GEMM switch, rows per expert (deepseek-v2-lite shape)"
  for t in $types; do
    run sweep-$t 90 "$cli" bench-moe --shape deepseek-v2-lite --experts "$t" --sweep 1,2,3,4,6,8,12,16,24,32
    { echo "== $t"; cat "$out/sweep-$t.tmp"; } >> "$out/sweep.txt"
    echo "sweep $t: $(tail -1 "$out/sweep-$t.tmp")"
  done
fi

for shape in $shapes; do
  for t in $types; do
    log "bench-moe $shape $t tokens $tokens"
    run bench-$shape-$t 150 "$cli" bench-moe --shape "$shape" --experts "$t" --tokens "$tokens" --json --seconds 1.5
    grep -v '^{' "$out/bench-$shape-$t.tmp" | tee -a "$out/logs.txt" | tail -5
  done
  if [[ -z ${SKIP_TORCH:-} ]]; then
    log "pytorch $shape"
    run torch-$shape 150 python3 "$src/scripts/bench_moe_torch.py" --shape "$shape" --tokens 512,4096 --threads "$(nproc)" \
      --seconds 1.5 --json
    cat "$out/torch-$shape.tmp"
  fi
done

rm -f "$out"/*.tmp "$out"/*.err
[[ -f $out/results.jsonl ]] && python3 "$src/scripts/moe_table.py" "$out/results.jsonl" | tee "$out/summary.txt"
