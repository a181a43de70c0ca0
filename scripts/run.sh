#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine, builds, and starts Tandem on its default model.
# Until the desktop app lands this is tandem-cli generating from a tiny fixture model; arguments are
# passed on to tandem-cli generate (for example --temperature 0.7 --new-tokens 64).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >&2
fixtures=${TANDEM_FIXTURES:-../shared/fixtures}
exec build/app/tandem-cli generate --model "$fixtures/tiny-qwen3moe" \
  --ids "1001 84 82 262 198 54 71 288 331 258 294 72 87 83 84 267 280 498 79 262 83 82 30 1002 198 1001 534 272 83 483 198" \
  "$@"
