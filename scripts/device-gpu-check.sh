#!/usr/bin/env bash
# One call on the GPU machine: build the engine with CUDA (sm_90), check every fixture on the GPU
# against the references and the CPU path, then benchmark the hybrid path on synthetic models of real
# shapes (tandem-cli bench). Needs, carried into the repo root:
#   .deps/      what the machine lacks, unpacked from Debian 12's packages: nlohmann-json3-dev's headers
#               and CMake files (.deps/include, .deps/share), and libpcre2-dev, libpcre2-8-0,
#               libutf8proc-dev, libutf8proc2, libnuma-dev, libnuma1 (dpkg -x into .deps, so .deps/usr); for
#               serve: libcpp-httplib-dev, libcpp-httplib0.11, libssl-dev, zlib1g-dev, libbrotli-dev (headers
#               and .pc files, whose prefix=/usr becomes prefix=${pcfiledir}/../../.., libssl.pc and
#               libcrypto.pc also -I${includedir}/x86_64-linux-gnu), and pkgconf-bin, libpkgconf3 (used
#               when the machine has no pkg-config); delete .deps' *.a and usr/share/{doc,man}: the working
#               tree and carry must stay under 64 MiB
#   (the fixture models are tests/fixtures, tracked in the repository)
# Steps: CHECKS=0 skips the fixture checks (CHECKS_DENSE=0 only their --dense int8 pass), BENCH=0 the benchmarks; BENCH_SHAPES, BENCH_EXPERTS,
# BENCH_DEFER narrow them; BENCH_ROUNDS=2 repeats the lot, alternating, to show the machine's noise.
# BENCH_GPU_MEMORY is bench's --gpu-memory (default 0: every routed expert on the CPU, the hybrid path
# these tables follow; auto or a size puts whole MoE layers on the GPU), BENCH_PROMPT its --prompt.
# PLACEMENT=1 adds issue 23's checks: the fixtures on the GPU with their experts there (auto), as bf16,
# int8 and int4 (PLACEMENT_TYPES) against the same experts on the CPU, the fixtures with every prompt
# streamed through the GPU (STREAM_BUDGET), and bench of qwen3-30b-a3b int4 with PLACEMENT_MEMORY (default
# "auto 8G 0"; "none" for no bench) at prompts 512 and 2048. It also checks the fixtures with split layers
# (1.5 layers' budget) and with the CPU computing half of each streamed layer (TANDEM_GPU_STREAM_CPU=50).
# BENCH_VARIANTS and MOE_VARIANTS run each benchmark once per variant, alternating: a variant is
# "default" or comma-separated environment settings, e.g. BENCH_VARIANTS="default TANDEM_GPU_CHAIN=0"
# or MOE_VARIANTS="default TANDEM_AMX_SLICE_KIB=384"; the tables name the variant of each row. A bench
# variant "cli=/tmp/old/app/tandem-cli" runs another build (BASELINE=COMMIT builds one, below), and
# "dense=int8" runs bench with --dense int8 (BENCH_DENSE: every variant's default, else checkpoint).
# A MOE_VARIANTS variant may name another build the same way (cli=PATH).
# MOE=1 adds the CPU expert engine alone: bench-moe --verify of the AMX kernels against the scalar ones,
# the GEMV/GEMM sweep for MOE_SWEEP types, bench-moe for MOE_SHAPES x MOE_TYPES at MOE_TOKENS and the
# PyTorch baseline (scripts/bench_moe_torch.py) at the same prefill sizes (MOE_TORCH=0: without it);
# MOE_VERIFY the types verified (default int4); MOE_FLAGS adds bench-moe
# flags (--phases: the gate/up and down shares of the threads' time). GEMV=1 adds the decode
# GEMV's variants alone (scripts/bench_gemv.cu). H2D=1 adds the host-to-device copy speed from each kind
# of host memory (scripts/bench_h2d.cu). REALWIDTH=1 adds issue 21's real-width checks:
# scripts/make_fixture.py makes the presets REALWIDTH_PRESETS (default all three: Qwen3-30B-A3B,
# DeepSeek-V3 FP8 and DeepSeek-V2-Lite widths, transformers on the GPU in float32 without TF32) in
# REALWIDTH_DIR (/tmp/realwidth; kept between calls of one warm machine), then scripts/check_golden.py
# runs them teacher-forced on the CPU with each of REALWIDTH_ISAS (default "avx512 amx") and on the GPU
# (REALWIDTH=1 CHECKS=0 BENCH=0 for these alone; docs/FIDELITY.md). Logs go to $OUT; the last lines
# printed are the summary tables.
# PEER=1: llama.cpp side by side on the same weights (../shared/peer copied into .peer and carried). A call
# starts what is missing in PEER_DIR (/tmp/peer, kept while the machine stays warm): llama-bench's build,
# detached (setsid, ~7 min, going on between back-to-back calls), the GGUF (gen_gguf.py qwen3-30b-a3b, Q4_0
# experts) and its Tandem store (convert --experts int4). Once llama-bench is built (waiting up to PEER_WAIT
# seconds, default 0), it runs llama.cpp's configurations (experts in system memory at pp512/tg128 and
# pp2048 with -ub 2048, half the layers' experts on the GPU with -ncmoe 24, everything on the GPU) and
# Tandem's bench on the same store with the matching --gpu-memory (0 and PEER_STREAM, default 1G: only the two
# staging layers of prefill streaming; PEER_HALF, default 9G: 24 layers and the staging layers; auto), and
# prints both with the ratios (PEER_REPS repetitions, default 3). Decode is compared from an empty context on
# both sides (llama-bench's tg, bench's one-token-prompt run). PEER_VARIANTS: environment settings, each a
# further run of the streamed row (default TANDEM_GPU_STREAM_CPU=0: the link alone, no CPU share);
# PEER_GPU_VARIANTS the same for the all-on-the-GPU row (default none). Tandem runs with --dense PEER_DENSE
# (default int8: llama.cpp's GGUF holds attention and the output head in Q8_0); a variant word
# dense=checkpoint runs its row with the store's bf16 dense weights, and cli=PATH another build (BASELINE).
# PEER_CPU_ROW=0 leaves out Tandem's row with every expert on the CPU and no streaming (--gpu-memory 0).
# PEER_ONLY=REGEX runs only the configurations whose name matches. A variant's settings are separated by
# commas (TANDEM_GPU_STREAM_ROUTED=1,TANDEM_GPU_STREAM_CPU=0).
# CPUPEER=1 (with PEER=1's GGUF, store and llama-bench): issue 25's CPU-only comparison, the GPU hidden
# (CUDA_VISIBLE_DEVICES=): llama-bench -ngl 0 -t 16 -p 512 -n 128 against tandem-cli bench --device cpu
# --prompt 512 --gen 128 for each --dense of CPUPEER_DENSE (default "int8 int4"; "store8": the store
# converted with --dense int8, made once beside the other), alternated CPUPEER_ROUNDS times (default 2).
# LONGPEER=1 (with PEER=1's GGUF, store and llama-bench): issue 28's long-context comparison, experts in system
# memory on both sides: llama-bench -ngl 99 -ot exps=CPU -fa 1 at pp512/pp16384 (-ub 2048) and tg32 at depth 0
# and 16384 (-d), against tandem-cli bench --gpu-memory LONGPEER_GPU_MEMORY (default PEER_STREAM: prompts streamed) --prompt 512,16384 --gen 32 (decode after the prompt
# is the depth row) and its one-token decode. LONGPEER_PROMPTS changes the sizes (default 512,16384).
# BATCH=1: issue 27's batched decode on the GPU: scripts/check_batched_decode.py (serve --batch 4 on the Pocket
# Dictionary: answers at once equal answers alone), then bench --streams BATCH_STREAMS (default 1,4,8) on
# BATCH_SHAPE (default qwen3-30b-a3b) with --gpu-memory BATCH_GPU_MEMORY (default 0: every expert on the CPU).
# PIPELINE=1: issue 29's pipeline by layer: the fixtures and greedy ids with TANDEM_GPU_STAGES=2 and 3 on one GPU,
# and with TANDEM_GPU_DEVICES=0,1 on a machine with two GPUs, then bench of PIPELINE_SHAPE (default
# qwen3-30b-a3b-8l) with one stage and the pipelines.
# KV8=1: issue 28's 8-bit KV cache on the GPU (EngineOptions::kvCache): every fixture at KV8_TOKENS (default 8192)
# with --kv-cache int8 on the GPU against the CPU's int8 rows (check_long_context.py --kv-cache int8), the
# GPU's int8 against its float32 on the fixtures and the Pocket Dictionary (check_kv_cache.py --device gpu,
# the CPU's table's method), then bench of KV8_SHAPES (default qwen3-30b-a3b-128k deepseek-v2-lite: 64K needs
# the 128K card's YaRN) at --prompt KV8_PROMPTS (default 512,16384,65536) --gen 32 --gpu-memory 1G, float32 and
# int8 alternated (each run bounded by KV8_TIMEOUT, default 240 s; KV8_BENCH=0 leaves the bench out, KV8_CHECKS=0 the checks).
# GPTOSS=1: gpt-oss-120b's hybrid decode against the CPU path, back to back, nothing else running: bench
# --synthetic GPTOSS_SHAPE (default gpt-oss-120b-8l) with mxfp4 experts on the CPU path, then the hybrid path
# (--gpu-memory 0) as mxfp4 and int4, then qwen3-30b-a3b-8l int4 hybrid as the control. GPTOSS_RUNS replaces
# that list (words DEVICE:EXPERTS:SHAPE), GPTOSS_DEFER is bench's --defer (e.g. 0,1,2: one model, three runs),
# GPTOSS_TIMEOUT bounds each run (default 150 s).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/tandem-out}
build=${TANDEM_BUILD_DIR:-/tmp/tandem-build}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
start=$(date +%s)
deps=$PWD/.deps
export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PKG_CONFIG_PATH="$deps/usr/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
pkgconfig_flag=()
command -v pkg-config >/dev/null || pkgconfig_flag=(-DPKG_CONFIG_EXECUTABLE="$deps/usr/bin/pkgconf")
# build_tree SOURCE BUILD LOGNAME: configure and build tandem-cli with CUDA for sm_90.
build_tree() {
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_BUILD_TESTS=OFF -DTANDEM_GUI=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$deps;$deps/usr" \
    -DNUMA_INCLUDE_DIR="$deps/usr/include" -DNUMA_LIBRARY="$deps/usr/lib/x86_64-linux-gnu/libnuma.so" "${pkgconfig_flag[@]}" \
    >"$out/configure$3.log" 2>&1 || { tail -30 "$out/configure$3.log"; exit 1; }
  cmake --build "$2" -j16 >"$out/build$3.log" 2>&1 || { grep -E "error" -A3 "$out/build$3.log" | head -60; exit 1; }
}
build_tree . "$build" ""
echo "build: $(( $(date +%s) - start )) s"
cli="$build/app/tandem-cli"

pd=${PEER_DIR:-/tmp/peer}
lb=/tmp/lcpp/build/bin/llama-bench
if [[ ${PEER:-0} == 1 ]]; then
  mkdir -p "$pd"
  if [[ ! -x $lb ]] && ! pgrep -f build-llama-cpp.sh >/dev/null; then
    setsid bash .peer/build-llama-cpp.sh cuda >"$pd/lcpp-build.log" 2>&1 </dev/null &
    echo "peer: llama.cpp build started"
  fi
  if [[ ! -d $pd/q30-int4 ]]; then
    (set -e
     [[ -d $pd/src/lcpp/gguf-py ]] || { mkdir -p "$pd/src"; tar xJf .peer/llama.cpp-src.tar.xz -C "$pd/src" lcpp/gguf-py; }
     t0=$(date +%s)
     [[ -s $pd/q30.gguf ]] || { PYTHONPATH=$pd/src/lcpp/gguf-py python3 .peer/gen_gguf.py qwen3-30b-a3b "$pd/q30.part.gguf" \
                                  --experts q4_0 && mv "$pd/q30.part.gguf" "$pd/q30.gguf"; }
     "$cli" convert --model "$pd/q30.gguf" --out "$pd/q30-int4" --experts int4 >"$pd/convert.log" 2>&1
     echo "peer: GGUF and store made in $(( $(date +%s) - t0 )) s") >"$pd/make.log" 2>&1 &
    peer_make=$!
    echo "peer: making the GGUF and its store in the background ($pd/make.log)"
  fi
fi
# BASELINE=TARBALL (e.g. .baseline/src.tar.gz, made here by `git archive --format=tar.gz -o
# .baseline/src.tar.gz COMMIT` and carried): builds that tree too, for BENCH_VARIANTS="default
# cli=/tmp/tandem-build-baseline/app/tandem-cli" in the same call.
if [[ -n ${BASELINE:-} ]]; then
  rm -rf /tmp/tandem-baseline && mkdir -p /tmp/tandem-baseline && tar -xzf "$BASELINE" -C /tmp/tandem-baseline
  build_tree /tmp/tandem-baseline /tmp/tandem-build-baseline "-baseline"
  echo "baseline build: $(( $(date +%s) - start )) s"
fi
# A variant's environment settings, one word each ("default": none); a cli=PATH part picks another
# tandem-cli (e.g. one built from an older commit) instead.
variant_env() { [[ $1 == default ]] || echo "${1//,/ }" | tr ' ' '\n' | grep -v '^cli=\|^dense=' | tr '\n' ' '; }
# A variant's dense=X part: bench's --dense X (int8 or checkpoint; default BENCH_DENSE, else checkpoint).
variant_dense() { local d; d=$(echo "${1//,/ }" | tr ' ' '\n' | sed -n 's/^dense=//p'); echo "${d:-${BENCH_DENSE:-checkpoint}}"; }
variant_cli() { local c; c=$(echo "${1//,/ }" | tr ' ' '\n' | sed -n 's/^cli=//p'); echo "${c:-$cli}"; }

if [[ ${CHECKS:-1} == 1 ]]; then
  # The routed-expert kernels (bf16, int8, int4, mxfp4; gpt-oss's epilogue) against float64
  # (scripts/check_gpu_experts.cu) for CHECK_EXPERT_SHAPES.
  nvcc -std=c++20 -arch=sm_90 -O3 -Iengine -Iengine/include scripts/check_gpu_experts.cu "$build/engine/libtandem_engine.a" \
    -L"$deps/usr/lib/x86_64-linux-gnu" -lnuma -ldl -lpthread -o "$build/check-gpu-experts" >"$out/check-gpu-experts-build.log" 2>&1 &&
    "$build/check-gpu-experts" --check-only --shapes "${CHECK_EXPERT_SHAPES:-gpt-oss-20b,awkward-gpt-oss,qwen3-30b-a3b}" \
      >"$out/check-gpu-experts.txt" 2>&1; echo "check_gpu_experts: $(tail -1 "$out/check-gpu-experts.txt" 2>/dev/null ||
      tail -5 "$out/check-gpu-experts-build.log")"; grep -E "^FAILED" "$out/check-gpu-experts.txt" | head -10
  # The FP8 weight kernels against float64 (scripts/check_fp8.cu).
  nvcc -std=c++20 -arch=sm_90 -O3 -Iengine -Iengine/include scripts/check_fp8.cu -lcublas -o "$build/check-fp8" \
    >"$out/check-fp8-build.log" 2>&1 && "$build/check-fp8" | tee "$out/check-fp8.txt" | tail -3 ||
    { echo "check_fp8 FAILED"; tail -20 "$out/check-fp8-build.log" "$out/check-fp8.txt"; }
  # The prompt's attention kernels against float64 (scripts/check_attention.cu); when they fail, the rest of
  # the call runs the scalar kernel (TANDEM_GPU_FLASH=0) and says so.
  nvcc -std=c++20 -arch=sm_90 -O3 -Iengine -Iengine/include scripts/check_attention.cu -o "$build/check-attention" \
    >"$out/check-attention-build.log" 2>&1 && "$build/check-attention" | tee "$out/check-attention.txt" ||
    { echo "check_attention FAILED: the rest runs TANDEM_GPU_FLASH=0"; tail -20 "$out/check-attention-build.log"
      export TANDEM_GPU_FLASH=0; }
  # gpt-oss on the GPU (sinks, biases, the clamped SwiGLU in the GPU's expert kernels): check_golden packs tiny-gpt-oss's experts as bf16, so the
  # GPU holds them (the expert kernels' epilogue); the second run keeps them on the CPU (--gpu-memory 0: the
  # bridge to the CPU's packed experts with their epilogue), the third is the MXFP4 store's case with its
  # experts on the CPU (TANDEM_GPU_MXFP4=0: the CPU's int8 activations move rows by ~1%: printed, not judged).
  python3 scripts/check_golden.py --cli "$cli" --fixtures tests/fixtures --device cpu --device gpu 2>&1 |
    tee "$out/golden.txt"
  echo "== tiny-gpt-oss on the GPU with its experts on the CPU (--gpu-memory 0)"
  python3 scripts/check_golden.py --cli "$cli" tests/fixtures/tiny-gpt-oss --device gpu --gpu-memory 0 2>&1 |
    tee "$out/golden-gptoss-cpu-experts.txt"
  echo "== tiny-gpt-oss on the GPU, --experts mxfp4, TANDEM_GPU_MXFP4=0 (experts on the CPU's MXFP4 kernels: ~1% per row expected)"
  TANDEM_GPU_MXFP4=0 python3 scripts/check_golden.py --cli "$cli" tests/fixtures/tiny-gpt-oss --device gpu --experts mxfp4 2>&1 |
    grep '^tiny' | tee "$out/golden-gptoss-mxfp4.txt"
  # MXFP4 experts on the GPU's kernels (the default since 2026-12-04): exact e2m1 weights and bf16
  # activations, so within the GPU tolerance of the reference (median 1.7e-3 there, from the activations).
  echo "== tiny-gpt-oss, --experts mxfp4 on the GPU's expert kernels"
  python3 scripts/check_golden.py --cli "$cli" tests/fixtures/tiny-gpt-oss --device gpu --experts mxfp4 2>&1 |
    grep -v '^    ' | tee "$out/golden-gptoss-mxfp4-gpu.txt"
  # gpt-oss's MXFP4 experts on the MXFP4 kernels (int8 activations) with each ISA: the same error on all.
  for isa in amx avx512; do
    echo "== tiny-gpt-oss, --experts mxfp4, $isa (int8 activations: ~1% per row expected)"
    python3 scripts/check_golden.py --cli "$cli" tests/fixtures/tiny-gpt-oss --device cpu --isa "$isa" --experts mxfp4 2>&1 |
      grep '^tiny' | tee -a "$out/golden-mxfp4.txt"
  done
  # Int8 dense weights (--dense int8) on both devices: the same int8 weights, so the GPU's rows against the
  # CPU's ("vs cpu"); both differ from the reference by the quantization, which the tiny random fixtures
  # amplify, so their rows above the float tolerance are printed for comparison, not as failures.
  if [[ ${CHECKS_DENSE:-1} == 1 ]]; then
    echo "== fixtures with --dense int8 (rows above tolerance expected: the weights' own error)"
    python3 scripts/check_golden.py --cli "$cli" --fixtures tests/fixtures --device cpu --device gpu --dense int8 2>&1 |
      grep -v '^    ' | tee "$out/golden-dense-int8.txt"
  fi
fi

# LONGCHECK=1: issue 28's correctness at long contexts: every fixture with an 8192-token prompt and 32
# teacher-forced decode steps after it, the GPU's rows against the CPU's (scripts/check_long_context.py;
# LONGCHECK_TOKENS changes the length, LONGCHECK_REFERENCE=1 adds transformers' float32 model).
if [[ ${LONGCHECK:-0} == 1 ]]; then
  python3 scripts/check_long_context.py --cli "$cli" --fixtures tests/fixtures --device cpu --device gpu \
    --tokens "${LONGCHECK_TOKENS:-8192}" $([[ ${LONGCHECK_REFERENCE:-0} == 1 ]] && echo --reference) 2>&1 |
    grep -v Warning | tee "$out/long-context.txt"
fi

if [[ ${KV8:-0} == 1 && ${KV8_CHECKS:-1} == 1 ]]; then
  python3 scripts/check_long_context.py --cli "$cli" --fixtures tests/fixtures --device cpu --device gpu --kv-cache int8 \
    --tokens "${KV8_TOKENS:-8192}" 2>&1 | grep -v Warning | tee "$out/kv8-long-context.txt"
  python3 scripts/check_kv_cache.py --cli "$cli" --fixtures tests/fixtures --model resources/models/pocket-dictionary \
    --device gpu --tokens 2048,8192 2>&1 | grep -v Warning | tee "$out/kv8-quality.txt"
fi
if [[ ${KV8:-0} == 1 && ${KV8_BENCH:-1} == 1 ]]; then
  for shape in ${KV8_SHAPES:-qwen3-30b-a3b-128k deepseek-v2-lite}; do
    for kv in f32 int8; do
      echo "== $shape --kv-cache $kv"
      timeout "${KV8_TIMEOUT:-240}" "$cli" bench --synthetic "$shape" --experts int4 --prompt "${KV8_PROMPTS:-512,16384,65536}" \
        --gen 32 --device gpu --gpu-memory 1G --kv-cache "$kv" 2>&1 | tee -a "$out/kv8-bench.txt" |
        grep -E "^  (prefill|decode|kv cache|step)|^tandem-cli:|KV cache int8|rror" | cut -c1-150
    done
  done
fi

if [[ ${REALWIDTH:-0} == 1 ]]; then
  rw=${REALWIDTH_DIR:-/tmp/realwidth}
  mkdir -p "$rw"
  # The three at once: 160 s on the H200 machine (2026-12-03; peaks 8.2, 16.8 and 5.8 GB of RAM).
  t0=$(date +%s)
  for preset in ${REALWIDTH_PRESETS:-qwen3-30b-a3b-3l deepseek-v3-2l-fp8 deepseek-v2-lite-3l}; do
    [[ -e $rw/$preset/golden.safetensors ]] && continue
    rm -rf "${rw:?}/$preset"
    (python3 scripts/make_fixture.py --preset "$preset" --out "$rw/$preset" --device cuda >"$out/make-$preset.log" 2>&1 &&
      echo "made $preset in $(( $(date +%s) - t0 )) s" ||
      { echo "make_fixture $preset FAILED"; tail -20 "$out/make-$preset.log"; rm -rf "${rw:?}/$preset"; }) &
  done
  wait
  t0=$(date +%s)
  python3 scripts/check_golden.py --cli "$cli" --fixtures "$rw" --device cpu --device gpu \
    $(for isa in ${REALWIDTH_ISAS:-avx512 amx}; do echo "--isa $isa"; done) --margins 3 --json "$out/realwidth.json" 2>&1 |
    tee "$out/realwidth.txt"
  echo "real-width checks: $(( $(date +%s) - t0 )) s"
fi

# A fixture's routed experts: $2 layers' worth of bf16 experts (3 matrices of hidden x intermediate each).
layer_bytes() { python3 -c "import json; c = json.load(open('$1/config.json')); h = c['hidden_size']; \
i = c.get('moe_intermediate_size') or c['intermediate_size']; \
e = c.get('num_experts') or c.get('n_routed_experts') or c.get('num_local_experts'); print(int($2 * e * 6 * h * i))"; }

if [[ ${PLACEMENT:-0} == 1 ]]; then
  for experts in ${PLACEMENT_TYPES:-auto int8 int4}; do
    [[ $experts == none ]] && continue
    echo "== fixtures on the GPU, experts $experts there (auto placement), against the CPU" | tee -a "$out/placement.txt"
    python3 scripts/check_golden.py --cli "$cli" --fixtures tests/fixtures --device cpu --device gpu --experts "$experts" \
      2>&1 | grep -v '^    ' | tee -a "$out/placement.txt"
  done
  # Prefill streaming: a budget of two staging layers and no whole layer, so every prompt of a fixture with
  # three MoE layers or more is streamed (bf16 experts: 2.2 x a layer's weights).
  echo "== fixtures on the GPU, prompts streamed (TANDEM_GPU_STREAM_MIN_TOKENS=1, --gpu-memory 2.2 layers)" |
    tee -a "$out/placement.txt"
  for f in tests/fixtures/tiny-*; do
    budget=$(python3 -c "import json; c = json.load(open('$f/config.json')); h = c['hidden_size']; \
i = c.get('moe_intermediate_size') or c['intermediate_size']; \
e = c.get('num_experts') or c.get('n_routed_experts') or c.get('num_local_experts'); print(int(2.2 * e * 6 * h * i))")
    echo "$(basename "$f"): $(TANDEM_GPU_STREAM_MIN_TOKENS=1 "$cli" generate --model "$f" --ids "1 2 3" --new-tokens 1 \
      --device gpu --gpu-memory "$budget" 2>&1 | grep 'routed experts')" | tee -a "$out/placement.txt"
    TANDEM_GPU_STREAM_MIN_TOKENS=1 python3 scripts/check_golden.py --cli "$cli" "$f" --device cpu --device gpu \
      --gpu-memory "$budget" 2>&1 | grep -v '^    ' | grep -v '^fixture' | tee -a "$out/placement.txt"
  done
  # Split layers: 1.5 layers' experts and no streaming, so one layer is wholly on the GPU and the next
  # split (its first experts on the GPU, the rest on the CPU). Then streaming with the CPU computing half
  # of each streamed layer's experts while the rest are copied (TANDEM_GPU_STREAM_CPU=50; the 2.2-layer
  # budget above also splits a layer: 0.2 of a layer beside the two staging layers).
  # stream-routed: every prompt streamed copying only the experts its tokens chose, alone and with the
  # CPU computing half of each layer's experts.
  for mode in split stream-cpu stream-routed stream-routed-cpu; do
    echo "== fixtures on the GPU, $mode" | tee -a "$out/placement.txt"
    for f in tests/fixtures/tiny-*; do
      budget=$(layer_bytes "$f" 2.2)
      case $mode in
        split) budget=$(layer_bytes "$f" 1.5); env=(TANDEM_GPU_STREAM_MIN_TOKENS=0) ;;
        stream-cpu) env=(TANDEM_GPU_STREAM_MIN_TOKENS=1 TANDEM_GPU_STREAM_CPU=50) ;;
        stream-routed) env=(TANDEM_GPU_STREAM_MIN_TOKENS=1 TANDEM_GPU_STREAM_ROUTED=1) ;;
        stream-routed-cpu) env=(TANDEM_GPU_STREAM_MIN_TOKENS=1 TANDEM_GPU_STREAM_ROUTED=1 TANDEM_GPU_STREAM_CPU=50) ;;
      esac
      echo "$(basename "$f"): $(env "${env[@]}" "$cli" generate --model "$f" --ids "1 2 3" --new-tokens 1 \
        --device gpu --gpu-memory "$budget" 2>&1 | grep 'routed experts')" | tee -a "$out/placement.txt"
      env "${env[@]}" python3 scripts/check_golden.py --cli "$cli" "$f" --device cpu --device gpu \
        --gpu-memory "$budget" 2>&1 | grep -v '^    ' | grep -v '^fixture' | tee -a "$out/placement.txt"
    done
  done
  : >"$out/placement.jsonl"
  for gm in ${PLACEMENT_MEMORY:-auto 8G 0}; do
    [[ $gm == none ]] && continue
    t0=$(date +%s)
    "$cli" bench --synthetic qwen3-30b-a3b --experts int4 --prompt 512,2048 --gen 128 --defer 0 --device gpu \
      --gpu-memory "$gm" --json 2>>"$out/placement.log" | tee -a "$out/placement-bench.txt" | grep '^{' |
      sed "s|^{|{\"gpu_memory\": \"$gm\", |" >>"$out/placement.jsonl"
    echo "(qwen3-30b-a3b int4 --gpu-memory $gm: $(( $(date +%s) - t0 )) s)"
  done
  python3 - "$out/placement.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f'{"--gpu-memory":12} {"prompt":>6} {"prefill":>8} {"decode":>7} {"step ms":>7}  placement')
for r in rows:
    print(f'{r["gpu_memory"]:12} {r.get("prompt_tokens", "")!s:>6} {r["prefill_tokens_per_second"]:8.1f} '
          f'{r["decode_tokens_per_second"]:7.1f} {r["step_ms"]:7.2f}  {r["placement"]}')
PY
fi

if [[ ${BENCH:-1} == 1 ]]; then
  : >"$out/bench.jsonl"
  for round in $(seq "${BENCH_ROUNDS:-1}"); do
  for shape in ${BENCH_SHAPES:-deepseek-v2-lite qwen3-30b-a3b deepseek-v3-4l}; do
    for experts in ${BENCH_EXPERTS:-int4}; do
      for bridge in queued; do
      for variant in ${BENCH_VARIANTS:-default}; do
        t0=$(date +%s)
        echo "== $shape $experts $bridge $variant" >>"$out/bench.log"
        env $(variant_env "$variant") "$(variant_cli "$variant")" bench --synthetic "$shape" --experts "$experts" \
          --prompt "${BENCH_PROMPT:-512}" --gen 128 --defer "${BENCH_DEFER:-0,2}" --device gpu \
          --gpu-memory "${BENCH_GPU_MEMORY:-0}" --dense "$(variant_dense "$variant")" --json 2>>"$out/bench.log" |
          tee -a "$out/bench.txt" | grep '^{' |
          sed "s|^{|{\"bridge\": \"$bridge\", \"variant\": \"$variant\", |" >>"$out/bench.jsonl"
        echo "($shape $experts $bridge $variant, round $round: $(( $(date +%s) - t0 )) s)"
      done
      done
    done
  done
  done
  python3 - "$out/bench.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f'{"shape":16} {"experts":5} {"bridge":6} {"variant":24} {"d":>2} {"prefill":>7} {"decode":>7} {"ceiling":>7} {"%":>4} '
      f'{"GPU alone":>9} {"wait":>5} {"between":>7} {"CPU":>5} {"GB/s":>5} {"step ms":>7} {"launch/step":>11}')
for r in rows:
    pct = 100 * r["decode_tokens_per_second"] / r["ceiling_tokens_per_second"] if r["ceiling_tokens_per_second"] else 0
    print(f'{r["shape"]:16} {r["experts"]:5} {r["bridge"]:6} {r["variant"][:24]:24} {r["deferral"]:>2} {r["prefill_tokens_per_second"]:7.1f} '
          f'{r["decode_tokens_per_second"]:7.1f} {r["ceiling_tokens_per_second"]:7.1f} {pct:4.0f} '
          f'{r["gpu_alone_ms"]:9.2f} {r["waiting_ms"]:5.2f} {r["between_steps_ms"]:7.2f} {r["cpu_experts_ms"]:5.2f} '
          f'{r.get("cpu_experts_gbps", 0):5.0f} '
          f'{r["step_ms"]:7.2f} {r["graph_launches"]:>5}/{r["steps"]:<5}')
PY
fi

if [[ ${GPTOSS:-0} == 1 ]]; then
  gshape=${GPTOSS_SHAPE:-gpt-oss-120b-8l}
  for v in ${GPTOSS_RUNS:-"cpu:mxfp4:$gshape" "gpu:mxfp4:$gshape" "gpu:int4:$gshape" "gpu:int4:qwen3-30b-a3b-8l"}; do
    IFS=: read -r dev experts shape <<<"$v"
    echo "== $shape $experts experts, --device $dev --gpu-memory 0 --defer ${GPTOSS_DEFER:-0}"
    timeout "${GPTOSS_TIMEOUT:-150}" "$cli" bench --synthetic "$shape" --experts "$experts" --prompt 1 --gen 64 --device "$dev" \
      --gpu-memory 0 --defer "${GPTOSS_DEFER:-0}" 2>&1 | tee -a "$out/gptoss.txt" | grep -E "^  (decode|ceiling|step)"
  done
fi

if [[ ${PIPELINE:-0} == 1 ]]; then
  # Issue 29's pipeline by layer: every fixture with 2 stages (each stage's routed experts on its GPU,
  # automatic budgets) and with 3 (every expert on the CPU) on this GPU (TANDEM_GPU_STAGES), then with 2
  # stages holding split layers (1.5 layers' experts shared by the stages, no streaming); greedy ids of the
  # Pocket Dictionary with 1-3 stages (equal), experts on the CPU and on the GPU; and, on a machine with two
  # GPUs or more, the same over GPUs 0 and 1 (TANDEM_GPU_DEVICES=0,1). Then bench of PIPELINE_SHAPE
  # (default qwen3-30b-a3b-8l) at each of PIPELINE_MEMORY (default "0 auto 1.7G": none, every expert, and
  # 2.5 layers a stage with two of them staging prompt streaming) with 1 and 2 stages (and two GPUs);
  # PIPELINE_TIMEOUT (default 120 s) each. A size is shared by the stages: "8G 16G" compares one GPU's 8G
  # with two stages of 8G each.
  variants=("TANDEM_GPU_STAGES=2" "TANDEM_GPU_STAGES=3")
  [[ $(nvidia-smi -L | wc -l) -ge 2 ]] && variants+=("TANDEM_GPU_DEVICES=0,1")
  for v in "${variants[@]}"; do
    echo "== check_golden, $v"
    env "$v" timeout 150 python3 scripts/check_golden.py --cli "$cli" --fixtures tests/fixtures --device gpu \
      $([[ $v == *STAGES=3 ]] && echo --gpu-memory 0) 2>&1 | tee -a "$out/pipeline-golden.txt" | grep -E "runs checked|FAIL|UNEXPL"
  done
  for v in "TANDEM_GPU_STAGES=2" $([[ ${#variants[@]} -gt 2 ]] && echo "TANDEM_GPU_DEVICES=0,1"); do
    echo "== check_golden, $v, split layers in each stage (1.5 layers' experts in all)"
    for f in tests/fixtures/tiny-*; do
      budget=$(layer_bytes "$f" 1.5)
      env "$v" TANDEM_GPU_STREAM_MIN_TOKENS=0 "$cli" generate --model "$f" --ids "1 2 3" --new-tokens 1 --device gpu \
        --gpu-memory "$budget" 2>&1 | grep -E "routed experts|pipeline stage" | sed "s|^|$(basename "$f"): |" | cut -c1-220 >>"$out/pipeline-split.txt"
      env "$v" TANDEM_GPU_STREAM_MIN_TOKENS=0 timeout 60 python3 scripts/check_golden.py --cli "$cli" "$f" --device gpu \
        --gpu-memory "$budget" 2>&1 | tee -a "$out/pipeline-golden.txt" | grep -E "runs checked|FAIL|UNEXPL" | sed "s|^|$(basename "$f"): |"
    done
    grep -c "pipeline stage.*single experts" "$out/pipeline-split.txt" | sed 's|^|stages holding split layers: |'
  done
  ids="1 393 264 201 337 372 322 82 265 899 288 316 33 2 201 1 527 644 201"
  for gm in 0 auto; do
    for v in "TANDEM_GPU_STAGES=1" "${variants[@]}"; do
      env "$v" timeout 60 "$cli" generate --model resources/models/pocket-dictionary --ids "$ids" --new-tokens 48 --temperature 0 \
        --device gpu --gpu-memory "$gm" >"$out/pipeline-gen.txt" 2>>"$out/pipeline-gen.log"
      echo "greedy ids, $v, --gpu-memory $gm: $(md5sum <"$out/pipeline-gen.txt" | cut -c1-8)"
    done
  done
  benches=("TANDEM_GPU_STAGES=1" "TANDEM_GPU_STAGES=2")
  [[ ${#variants[@]} -gt 2 ]] && benches+=("TANDEM_GPU_DEVICES=0,1")
  for gm in ${PIPELINE_MEMORY:-0 auto 1.7G}; do
    for v in "${benches[@]}"; do
      echo "== bench ${PIPELINE_SHAPE:-qwen3-30b-a3b-8l}, $v, --gpu-memory $gm"
      env "$v" timeout "${PIPELINE_TIMEOUT:-120}" "$cli" bench --synthetic "${PIPELINE_SHAPE:-qwen3-30b-a3b-8l}" --experts int4 --prompt 512,2048 --gen 64 \
        --device gpu --gpu-memory "$gm" 2>&1 | tee -a "$out/pipeline-bench.txt" | grep -E "^  (prefill|decode)|pipeline stage|^routed" | cut -c1-200
    done
  done
fi

if [[ ${BATCH:-0} == 1 ]]; then
  echo "== batched decode: serve --batch 4 on the GPU against each request alone"
  timeout 150 python3 scripts/check_batched_decode.py --cli "$cli" --model resources/models/pocket-dictionary --device gpu 2>&1 |
    tee "$out/batched-decode.txt" | tail -6
  echo "== bench --streams ${BATCH_STREAMS:-1,4,8} on ${BATCH_SHAPE:-qwen3-30b-a3b}"
  timeout "${BATCH_TIMEOUT:-240}" "$cli" bench --synthetic "${BATCH_SHAPE:-qwen3-30b-a3b}" --experts int4 --streams "${BATCH_STREAMS:-1,4,8}" --prompt 64 \
    --gen 64 --device gpu --gpu-memory "${BATCH_GPU_MEMORY:-0}" >"$out/streams.txt" 2>&1
  tail -25 "$out/streams.txt"
fi

if [[ ${H2D:-0} == 1 ]]; then
  # The link's speed from each kind of host memory streaming could read (scripts/bench_h2d.cu).
  nvcc -std=c++20 -arch=sm_90 -O2 scripts/bench_h2d.cu -o "$build/bench-h2d" >"$out/bench-h2d-build.log" 2>&1 &&
    "$build/bench-h2d" /tmp | tee "$out/h2d.txt" || { echo "bench_h2d FAILED"; tail -20 "$out/bench-h2d-build.log"; }
fi

if [[ ${GEMV:-0} == 1 ]]; then
  nvcc -std=c++20 -arch=sm_90 -O3 -Iengine -Iengine/include scripts/bench_gemv.cu \
    -o "$build/bench-gemv" >"$out/bench-gemv-build.log" 2>&1 || { tail -20 "$out/bench-gemv-build.log"; exit 1; }
  "$build/bench-gemv" | tee "$out/gemv.txt"
fi

if [[ ${MOE:-0} == 1 ]]; then
  : >"$out/moe.jsonl"
  for t in ${MOE_VERIFY:-int4}; do
    echo "verify $t:"
    TANDEM_CPU_ISA=amx "$cli" bench-moe --shape deepseek-v2-lite --experts "$t" --tokens 1 --verify --seconds 0.1 \
      --experts-in-memory 8 2>&1 | grep -E '^verify:|FAILED|lacks|rror' | tail -8
  done
  for t in ${MOE_SWEEP:-}; do
    echo "sweep $t (deepseek-v2-lite): $("$cli" bench-moe --shape deepseek-v2-lite --experts "$t" \
      --sweep 1,2,3,4,6,8,12,16,24,32 2>>"$out/moe.log" | tee -a "$out/sweep.txt" | tail -1)"
  done
  tokens=${MOE_TOKENS:-512,4096}
  for shape in ${MOE_SHAPES:-deepseek-v3 qwen3-30b-a3b deepseek-v2-lite}; do
    for t in ${MOE_TYPES:-int4}; do
      for variant in ${MOE_VARIANTS:-default}; do
        env $(variant_env "$variant") timeout 200 "$(variant_cli "$variant")" bench-moe --shape "$shape" --experts "$t" --tokens "$tokens" \
          --json --seconds 1.5 ${MOE_FLAGS:-} 2>>"$out/moe.log" | grep '^{' | sed "s|^{|{\"variant\": \"$variant\", |" >>"$out/moe.jsonl"
      done
    done
    if [[ ${MOE_TORCH:-1} == 1 ]]; then
      torch_tokens=$(echo "$tokens" | tr ',' '\n' | awk '$1 > 1' | paste -sd,)
      [[ -n $torch_tokens ]] && timeout 200 python3 scripts/bench_moe_torch.py --shape "$shape" --tokens "$torch_tokens" \
        --threads "$(nproc)" --seconds 1.5 --json 2>>"$out/moe.log" | grep '^{' >>"$out/moe.jsonl"
    fi
  done
  python3 scripts/moe_table.py "$out/moe.jsonl"
fi

if [[ ${PEER:-0} == 1 ]]; then
  [[ -n ${peer_make:-} ]] && wait "$peer_make"  # the GGUF and the store, when this call made them
  cat "$pd/make.log" 2>/dev/null
  for _ in $(seq "${PEER_WAIT:-0}"); do [[ -x $lb ]] && break; sleep 1; done
  if [[ ! -x $lb ]]; then
    echo "peer: llama-bench not built yet ($(tail -c 300 "$pd/lcpp-build.log" 2>/dev/null | tr '\n' ' '))"
  elif [[ ! -d $pd/q30-int4 ]]; then
    echo "peer: no store yet"; tail -5 "$pd/convert.log" 2>/dev/null
  else
    reps=${PEER_REPS:-3}
    : >"$out/peer.jsonl"
    # name | llama-bench arguments (-: none) | Tandem's --gpu-memory (-: none) | prompt sizes [| Tandem's
    # environment]; rows of one name are compared
    while IFS='|' read -r name largs gm prompts tenv; do
      [[ -n ${PEER_ONLY:-} && ! $name =~ ${PEER_ONLY} ]] && continue
      t0=$(date +%s)
      [[ $largs == - ]] || $lb -m "$pd/q30.gguf" $largs -t "$(nproc)" -fa 1 -r "$reps" -o jsonl 2>>"$out/peer-llama.log" |
        sed "s|^{|{\"config\": \"$name\", \"who\": \"llama.cpp\", |" >>"$out/peer.jsonl"
      # Tandem's dense weights: int8 (PEER_DENSE, default) as llama.cpp's GGUF holds them in Q8_0; a variant
      # word dense=checkpoint runs that row with the store's bf16 instead.
      dense=${PEER_DENSE:-int8}; envs=(); tcli=$cli
      for word in ${tenv//,/ }; do
        case $word in dense=*) dense=${word#dense=} ;; cli=*) tcli=${word#cli=} ;; *) envs+=("$word") ;; esac
      done
      [[ $gm == - ]] || env "${envs[@]}" "$tcli" bench --model "$pd/q30-int4" --prompt "$prompts" --gen 128 --defer 0,2 --device gpu --gpu-memory "$gm" --no-verify \
        --dense "$dense" --json 2>>"$out/peer-tandem.log" | grep '^{' |
        sed "s|^{|{\"config\": \"$name\", \"who\": \"tandem\", \"env\": \"${tenv:-}\", |" >>"$out/peer.jsonl"
      echo "($name: $(( $(date +%s) - t0 )) s)"
    done <<EOF2
experts in RAM|-ngl 99 -ot exps=CPU -p 512 -n 128|-|
experts in RAM|-ngl 99 -ot exps=CPU -p 2048 -ub 2048 -b 2048 -n 0|$([[ ${PEER_CPU_ROW:-1} == 1 ]] && echo 0 || echo -)|512,2048
experts in RAM|-|${PEER_STREAM:-1G}|512,2048
$(for v in ${PEER_VARIANTS:-TANDEM_GPU_STREAM_CPU=0}; do echo "experts in RAM|-|${PEER_STREAM:-1G}|512,2048|$v"; done)
half on GPU|-ngl 99 -ncmoe 24 -p 512 -n 128|${PEER_HALF:-9G}|512
all on GPU|-ngl 99 -p 512,2048 -ub 2048 -b 2048 -n 128|auto|512,2048
$(for v in ${PEER_GPU_VARIANTS:-}; do echo "all on GPU|-|auto|512,2048|$v"; done)
EOF2
    python3 - "$out/peer.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f'{"configuration":24} {"test":8} {"llama.cpp":>9} {"tandem":>8} {"ratio":>6}  tandem placement')
for config in dict.fromkeys(r["config"] for r in rows):
    ll = [r for r in rows if r["config"] == config and r["who"] == "llama.cpp"]
    tt = [r for r in rows if r["config"] == config and r["who"] == "tandem"]
    tests = []
    for r in ll:
        if r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0: tests.append((f'pp{r["n_prompt"]}', r["avg_ts"], r["n_prompt"], None))
        if r.get("n_gen", 0) > 0 and r.get("n_prompt", 0) == 0: tests.append((f'tg{r["n_gen"]}', r["avg_ts"], None, r["n_gen"]))
    for test, theirs, pp, tg in tests:
        for t in tt:
            if pp and t.get("prompt_tokens") == pp and t["deferral"] == 0:
                ours, d = t["prefill_tokens_per_second"], ""
            elif tg and t.get("prompt_tokens") == min(x.get("prompt_tokens", 0) for x in tt):
                ours, d = t["decode_tokens_per_second"], f' d={t["deferral"]}'
            else:
                continue
            print(f'{config:24} {test + d:8} {theirs:9.1f} {ours:8.1f} {ours / theirs:6.2f}  {t.get("env", "")} {t["placement"][:50]}')
placements = dict.fromkeys(r["placement"] for r in rows if r["who"] == "tandem")
for p in placements: print("placement:", p)
PY
  fi
fi

if [[ ${CPUPEER:-0} == 1 && -x $lb && -d $pd/q30-int4 ]]; then
  : >"$out/cpupeer.jsonl"
  if [[ " ${CPUPEER_DENSE:-int8 int4} " == *" store8 "* && ! -d $pd/q30-int4-d8 ]]; then
    t0=$(date +%s)
    "$cli" convert --model "$pd/q30.gguf" --out "$pd/q30-int4-d8" --experts int4 --dense int8 >"$out/convert-d8.log" 2>&1 ||
      tail -5 "$out/convert-d8.log"
    echo "(store with int8 dense weights: $(( $(date +%s) - t0 )) s)"
  fi
  for round in $(seq "${CPUPEER_ROUNDS:-2}"); do
    CUDA_VISIBLE_DEVICES= $lb -m "$pd/q30.gguf" -ngl 0 -t "$(nproc)" -p 512 -n 128 -r 2 -o jsonl 2>>"$out/cpupeer-llama.log" |
      sed "s|^{|{\"who\": \"llama.cpp\", \"round\": $round, |" >>"$out/cpupeer.jsonl"
    for dense in ${CPUPEER_DENSE:-int8 int4}; do
      store=$pd/q30-int4; d=$dense
      [[ $dense == store8 ]] && { store=$pd/q30-int4-d8; d=checkpoint; }
      CUDA_VISIBLE_DEVICES= "$cli" bench --model "$store" --prompt 512 --gen 128 --defer 0 --device cpu --dense "$d" --no-verify \
        --json 2>>"$out/cpupeer-tandem.log" | grep '^{' | sed "s|^{|{\"who\": \"tandem $dense\", \"round\": $round, |" >>"$out/cpupeer.jsonl"
    done
  done
  python3 - "$out/cpupeer.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f'{"CPU only (GPU hidden)":24} {"round":>5} {"pp512":>7} {"tg128":>7} {"pp ratio":>8} {"tg ratio":>8}')
for rnd in sorted({r["round"] for r in rows}):
    ll = [r for r in rows if r["who"] == "llama.cpp" and r["round"] == rnd]
    pp = next((r["avg_ts"] for r in ll if r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0), 0)
    tg = next((r["avg_ts"] for r in ll if r.get("n_gen", 0) > 0 and r.get("n_prompt", 0) == 0), 0)
    print(f'{"llama.cpp":24} {rnd:5} {pp:7.1f} {tg:7.1f}')
    for r in rows:
        if r["who"] == "llama.cpp" or r["round"] != rnd: continue
        p, t = r["prefill_tokens_per_second"], r["decode_tokens_per_second"]
        print(f'{r["who"]:24} {rnd:5} {p:7.1f} {t:7.1f} {p / pp if pp else 0:8.2f} {t / tg if tg else 0:8.2f}')
PY
fi

if [[ ${LONGPEER:-0} == 1 && -x $lb && -d $pd/q30-int4 ]]; then
  : >"$out/longpeer.jsonl"
  lp=${LONGPEER_PROMPTS:-512,16384}; deepest=${lp##*,}
  t0=$(date +%s)
  $lb -m "$pd/q30.gguf" -ngl 99 -ot exps=CPU -fa 1 -t "$(nproc)" -p "$lp" -ub 2048 -b 2048 -n 0 -r 1 -o jsonl \
    2>>"$out/longpeer-llama.log" | sed 's|^{|{"who": "llama.cpp", |' >>"$out/longpeer.jsonl"
  $lb -m "$pd/q30.gguf" -ngl 99 -ot exps=CPU -fa 1 -t "$(nproc)" -p 0 -n 32 -d "0,$deepest" -r 1 -o jsonl \
    2>>"$out/longpeer-llama.log" | sed 's|^{|{"who": "llama.cpp", |' >>"$out/longpeer.jsonl"
  echo "(llama.cpp long context: $(( $(date +%s) - t0 )) s)"; t0=$(date +%s)
  "$cli" bench --model "$pd/q30-int4" --prompt "$lp" --gen 32 --defer 0 --device gpu --gpu-memory "${LONGPEER_GPU_MEMORY:-${PEER_STREAM:-1G}}" --dense "${PEER_DENSE:-int8}" \
    --no-verify --json 2>>"$out/longpeer-tandem.log" | grep '^{' | sed 's|^{|{"who": "tandem", |' >>"$out/longpeer.jsonl"
  echo "(tandem long context: $(( $(date +%s) - t0 )) s)"
  python3 - "$out/longpeer.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ll = [r for r in rows if r["who"] == "llama.cpp"]
tt = [r for r in rows if r["who"] == "tandem"]
print(f'{"experts in RAM, long context":30} {"llama.cpp":>9} {"tandem":>8} {"ratio":>6}')
def show(test, theirs, ours):
    print(f'{test:30} {theirs:9.1f} {ours:8.1f} {ours / theirs if theirs else 0:6.2f}')
for r in ll:
    if r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0:
        t = next((t for t in tt if t.get("prompt_tokens") == r["n_prompt"]), None)
        if t: show(f'pp{r["n_prompt"]} (TTFT {r["n_prompt"] / r["avg_ts"]:.1f} s vs {r["n_prompt"] / t["prefill_tokens_per_second"]:.1f} s)', r["avg_ts"], t["prefill_tokens_per_second"])
    if r.get("n_gen", 0) > 0 and r.get("n_prompt", 0) == 0:
        d = r.get("n_depth", 0)
        want = min(x.get("prompt_tokens", 0) for x in tt) if d == 0 else d
        t = next((t for t in tt if t.get("prompt_tokens") == want), None) if d else min(tt, key=lambda x: x.get("prompt_tokens", 0), default=None)
        if t: show(f'tg{r["n_gen"]} @ d{d}', r["avg_ts"], t["decode_tokens_per_second"])
PY
fi
