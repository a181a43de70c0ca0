#!/usr/bin/env bash
# One call on the GPU machine: build the engine with CUDA (sm_90), check every fixture on the GPU
# against the references and the CPU path, and time decode. Needs, carried into the repo root:
#   .deps/      what the machine lacks, unpacked from Debian 12's packages: nlohmann-json3-dev's headers
#               and CMake files (.deps/include, .deps/share), and libpcre2-dev, libpcre2-8-0,
#               libutf8proc-dev, libutf8proc2 (dpkg -x into .deps, so under .deps/usr)
#   .fixtures/  a copy of ../shared/fixtures
# Logs go to $OUT; the last lines printed are the summary table.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/tandem-out}
build=${TANDEM_BUILD_DIR:-/tmp/tandem-build}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
start=$(date +%s)
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_BUILD_TESTS=OFF -DTANDEM_GUI=OFF \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps;$PWD/.deps/usr" >"$out/configure.log" 2>&1 ||
  { tail -30 "$out/configure.log"; exit 1; }
cmake --build "$build" -j16 >"$out/build.log" 2>&1 || { grep -E "error" -A3 "$out/build.log" | head -60; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
cli="$build/app/tandem-cli"

python3 scripts/check_golden.py --cli "$cli" --fixtures .fixtures --device cpu --device gpu 2>&1 | tee "$out/golden.txt"
echo "the same with plain bf16 GEMM inputs (TANDEM_GPU_PRECISION=bf16):"
TANDEM_GPU_PRECISION=bf16 python3 scripts/check_golden.py --cli "$cli" --fixtures .fixtures --device gpu 2>&1 |
  tee "$out/golden-bf16.txt"

echo "decode on the long prompt (128 tokens, greedy):"
for f in .fixtures/tiny-*/; do
  python3 - "$f/golden.safetensors" >"$out/ids.txt" <<'PY'
import json, struct, sys, array
raw = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', raw[:8])[0]
b, e = json.loads(raw[8:8 + n])['long.prompt_ids']['data_offsets']
a = array.array('i'); a.frombytes(raw[8 + n + b:8 + n + e]); print(' '.join(map(str, a)))
PY
  for run in "cpu host" "gpu host" "gpu spin"; do
    set -- $run
    printf '%-22s %s %-4s  ' "$(basename "$f")" "$1" "$2"
    TANDEM_GPU_WAIT=$2 "$cli" generate --model "$f" --ids-file "$out/ids.txt" --new-tokens 128 --temperature 0 \
      --device "$1" 2>&1 >/dev/null | grep -E 'tok/s|note|error' | tr '\n' ' '
    echo
  done
done
echo "Expert Deferral (d=2) on the GPU against the CPU path with the same deferral:"
python3 scripts/check_golden.py --cli "$cli" --fixtures .fixtures --device cpu --device gpu --defer 2 2>&1 |
  grep -E ' gpu |fixture' | tee "$out/golden-defer2.txt"
