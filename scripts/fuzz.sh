#!/usr/bin/env bash
# Coverage-guided fuzzing of the engine's parsers (tests/fuzz): builds the libFuzzer targets into
# ./build-fuzz (clang, ASan + UBSan; reused when present), runs each for SECONDS (default 30) on a copy of
# its seed corpus in tests/fuzz/corpus, and prints one line per target. Exits 1 when any target crashed,
# hung, ran out of memory or threw anything but tandem::Error; the input that did it is kept under
# build-fuzz/crashes/<target>/ and its path printed (reproduce: build-fuzz/tests/fuzz/<target> PATH).
#   scripts/fuzz.sh [SECONDS_PER_TARGET]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
[[ $seconds =~ ^[0-9]+$ ]] || { echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET]" >&2; exit 2; }
build=build-fuzz
targets=(fuzz_chat_template fuzz_tokenizer_json fuzz_config_json fuzz_gguf fuzz_safetensors)

if [[ ! -f $build/build.ninja ]]; then
  CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTANDEM_GUI=OFF -DTANDEM_CUDA=OFF -DTANDEM_BUILD_TESTS=OFF -DTANDEM_FUZZ=ON >/dev/null
fi
cmake --build "$build" --target tandem_fuzzers

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
failed=0
for t in "${targets[@]}"; do
  run=$build/fuzz-run/$t crashes=$build/crashes/$t
  rm -rf "$run" && mkdir -p "$run/corpus" "$crashes"
  cp tests/fuzz/corpus/"$t"/* "$run/corpus/"
  status=0
  "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$crashes/" "$run/corpus" >"$run/log" 2>&1 || status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$run/log" | tail -1)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$run/log" | tail -1)
  if ((status == 0)); then
    result=ok
  else
    failed=1
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$run/log" | tail -1)
    result="FAILED (exit $status): ${artifact:-no input written}; log $run/log"
  fi
  printf '%-20s %4ss  %10s execs  %-22s %s\n' "$t" "$seconds" "${execs:-?}" "${cov:-cov: ?}" "$result"
  # The stack and the input's bytes, so that a CI log alone shows what was found.
  if ((status != 0)); then
    tail -n 60 "$run/log"
    if [[ -n ${artifact:-} && -f $artifact ]]; then od -A d -c "$artifact" | head -n 20 || true; fi
  fi
done
exit "$failed"
